package mapexport

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestExportGolden: the exported objects of the example policies, as
// export-map writes them. REFRESH_GOLDEN=true rewrites the files.
func TestExportGolden(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			src := "examples/policies/" + mode
			exported, gaps, err := Export(golden.Policies(t, src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(gaps) > 0 {
				t.Fatalf("gaps: %v", gaps)
			}
			var out bytes.Buffer
			if err := WriteYAML(&out, exported, gaps, []string{src}); err != nil {
				t.Fatal(err)
			}
			golden.Compare(t, "internal/mapexport/testdata/"+mode+".yaml", out.Bytes())
		})
	}
}

// TestExportShape checks what the golden files show, so a refresh cannot
// quietly change it: CREATE of pods only, kube-system and the excluded
// namespaces never, Fail, IfNeeded, the policy's selectors as selectors.
func TestExportShape(t *testing.T) {
	exported, _, err := Export(golden.Policies(t, "examples/policies/memory"), Options{ExcludeNamespaces: []string{"sandbox-webhook"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(exported) != 1 {
		t.Fatalf("%d exported policies, want 1", len(exported))
	}
	p, b := exported[0].Policy, exported[0].Binding
	if p.Name != "sandbox-webhook-sandbox-seed" || b.Spec.PolicyName != p.Name {
		t.Errorf("policy %q bound by %q", p.Name, b.Spec.PolicyName)
	}
	s := p.Spec
	if *s.FailurePolicy != "Fail" || s.ReinvocationPolicy != "IfNeeded" {
		t.Errorf("failurePolicy %s, reinvocationPolicy %s", *s.FailurePolicy, s.ReinvocationPolicy)
	}
	rules := s.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"pods"}) || len(rules[0].Operations) != 1 || rules[0].Operations[0] != "CREATE" {
		t.Errorf("resource rules %+v, want pods CREATE", rules)
	}
	want := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: "NotIn", Values: []string{"kube-system", "sandbox-webhook"}}
	if !slices.ContainsFunc(s.MatchConstraints.NamespaceSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
		return cmp.Equal(r, want)
	}) {
		t.Errorf("namespace selector %+v lacks %+v", s.MatchConstraints.NamespaceSelector, want)
	}
	obj := s.MatchConstraints.ObjectSelector
	if obj.MatchLabels["app"] != "sandbox" || len(obj.MatchExpressions) != 1 || obj.MatchExpressions[0].Key != "sandbox-webhook.io/skip" {
		t.Errorf("object selector %+v, want app=sandbox and the opt-out label NotIn [true]", obj)
	}
}

// TestGaps: a shadow policy and several enforcing policies are gaps, listed
// exactly; the example sets have none.
func TestGaps(t *testing.T) {
	for _, c := range []struct {
		name   string
		paths  []string
		opts   Options
		want   []Gap
		policy int // exported policies
	}{
		{name: "memory", paths: []string{"examples/policies/memory"}, policy: 1},
		{name: "disk", paths: []string{"examples/policies/disk"}, policy: 1},
		{name: "forced disk", paths: []string{"examples/policies/memory"}, opts: Options{LeakMitigation: mutate.LeakMitigationOn}, policy: 1},
		{name: "hostpath only", paths: []string{"testdata/policies/hostpath-only.yaml"}, policy: 1},
		{name: "multi", paths: []string{"testdata/policies/multi"}, policy: 1, want: []Gap{
			{Policy: "c-shadow", What: "enforcement: shadow",
				Why: "a MAP has no report-only mode: it mutates or it does nothing, and it cannot count or log what it would do; not exported"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			exported, gaps, err := Export(golden.Policies(t, c.paths...), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, gaps); d != "" {
				t.Errorf("gaps (-want +got):\n%s", d)
			}
			if len(exported) != c.policy {
				t.Errorf("%d exported policies, want %d", len(exported), c.policy)
			}
			for _, e := range exported {
				if got, partial := e.Policy.Annotations[GapsAnnotation]; partial != (len(gaps) > 0) {
					t.Errorf("%s: %s annotation %q, gaps %v", e.Policy.Name, GapsAnnotation, got, gaps)
				}
			}
		})
	}
}
