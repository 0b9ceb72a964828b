package mapexport

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
)

// evalCEL evaluates expr in the CEL environment a 1.36 apiserver compiles
// new MAP expressions with, x bound to a dynamic value.
func evalCEL(t *testing.T, expr string, x any) any {
	t.Helper()
	env, err := environment.MustBaseEnvSet(CELCompatibility).Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err = env.Extend(cel.Variable("x", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(map[string]any{"x": x})
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return out.Value()
}

// TestCanonicalQuantity: the CEL spelling of a quantity the apiserver hands
// a MAP (already canonical) is the webhook's Quantity.String() of it.
func TestCanonicalQuantity(t *testing.T) {
	inputs := []string{"0", "1", "512", "999", "1000", "1023", "1024", "1025", "1536", "2047", "2048",
		"0.5Ki", "1Ki", "976.5625Ki", "1Mi", "1M", "1000000", "1048576", "8G", "8Gi", "8192Mi", "8.00Gi",
		"9073741824", "1e3", "8e9", "12e6", "1E", "1.5Gi", "3Ti", "5P", "100k"}
	for _, in := range inputs {
		// What the apiserver's JSON of the pod spells, then what the
		// webhook's decoding of that prints.
		q := resource.MustParse(in)
		sent := q.String()
		w := resource.MustParse(sent)
		want := w.String()
		if got := evalCEL(t, canonicalQuantity("x"), sent); got != want {
			t.Errorf("%s (sent as %s): CEL spells %v, the webhook %s", in, sent, got, want)
		}
	}
}

// TestQuantitySum: a sum of quantities has the format of its first non-zero
// term (resource.Quantity.Add); the CEL formatter spells the integer sum in
// that format exactly as the Go sum's String().
func TestQuantitySum(t *testing.T) {
	units := []string{"", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e6"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n := 1 + r.IntN(4)
		terms := make([]string, n)
		var sum resource.Quantity
		for i := range terms {
			var q resource.Quantity
			switch r.IntN(5) {
			case 0:
				q = resource.MustParse("0")
			case 1:
				q = *resource.NewQuantity(r.Int64N(1<<40), resource.BinarySI)
			default:
				q = resource.MustParse(fmt.Sprintf("%d%s", r.IntN(3000), units[r.IntN(len(units))]))
			}
			// The terms reach both as the apiserver spells them.
			q = resource.MustParse(q.String())
			terms[i] = q.String()
			if i == 0 {
				sum = q.DeepCopy()
			} else {
				sum.Add(q)
			}
		}
		want := sum.String()
		expr := formatQuantity("x.map(s, quantity(s).asInteger()).sum()",
			fmt.Sprintf("[x.filter(s, quantity(s).asInteger() != 0)].map(nz, size(nz) > 0 ? %s : 'bin')[0]", quantityClass("nz[0]")))
		if got := evalCEL(t, expr, terms); got != want {
			t.Errorf("sum of %v: CEL spells %v, Go %s", terms, got, want)
		}
	}
}

// TestGlobRegexp: the regexps of name globs match what path.Match matches.
func TestGlobRegexp(t *testing.T) {
	names := []string{"sandbox", "sandboxes", "sandbox-1", "rl-a", "rl-", "r", "istio-proxy", "grader", "a.b", "x*y", "ab", "b", "c", "-"}
	globs := []string{"sandbox*", "rl-*", "*", "?", "sandbox-?", "[a-c]", "[^a-c]", "a.b", `x\*y`, "istio-*", "*-proxy", "gr?der"}
	for _, g := range globs {
		expr := globsMatch("x", []string{g})
		for _, n := range names {
			want, _ := path.Match(g, n)
			if got := expr == "true" || evalCEL(t, expr, n) == true; got != want {
				t.Errorf("glob %q, name %q: regexp %s matches %v, path.Match %v", g, n, expr, got, want)
			}
		}
	}
}

func TestLayoutKeepsStrings(t *testing.T) {
	e := "variables.a && " + strings.Repeat("'x && y ? z : w' + ", 8) + "'end'"
	got := layout(e)
	if strings.ReplaceAll(got, "\n  ", " ") != strings.ReplaceAll(e, "  ", " ") {
		t.Errorf("layout changed the expression:\n%s", got)
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Count(line, "'")%2 != 0 {
			t.Errorf("layout split a string literal: %q", line)
		}
	}
}
