package plugincmd

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

var (
	// An example's marker says its exit code when it is not 0: "exits 1".
	exampleRE   = regexp.MustCompile("(?s)<!-- example:([^>]*)-->\\s*```console\\n\\$ kubectl-sandbox_webhook ([^\\n]*)\\n(.*?)```\\s*<!-- /example -->")
	exitsRE     = regexp.MustCompile(`exits (\d+)`)
	policyRefRE = regexp.MustCompile("(?s)<!-- policy-reference:[^>]*-->\\s*```yaml\\n(.*?)```\\s*<!-- /policy-reference -->")
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(testkit.Path("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADMEExamples runs every command the README shows with its output and
// requires the README to show exactly what the command prints (stderr, then
// stdout, as a terminal shows them).
func TestREADMEExamples(t *testing.T) {
	matches := exampleRE.FindAllStringSubmatch(readme(t), -1)
	if len(matches) < 2 {
		t.Fatalf("found %d README examples, want the dry-run and the validate example", len(matches))
	}
	t.Chdir(testkit.Root())
	for _, m := range matches {
		want := "0"
		if e := exitsRE.FindStringSubmatch(m[1]); e != nil {
			want = e[1]
		}
		t.Run(m[2], func(t *testing.T) {
			stdout, stderr, code := commandtest.RunCLI(t, Main, "", strings.Fields(m[2])...)
			if got := stderr + stdout; got != m[3] {
				t.Errorf("README shows:\n%s\nthe command prints:\n%s", m[3], got)
			}
			if fmt.Sprint(code) != want {
				t.Errorf("the command exits %d; the README's example says %s", code, want)
			}
		})
	}
}

// TestREADMEPolicyReference loads the README's policy reference so the
// documented format cannot drift from the loader.
func TestREADMEPolicyReference(t *testing.T) {
	m := policyRefRE.FindStringSubmatch(readme(t))
	if m == nil {
		t.Fatal("README has no policy reference block")
	}
	ps, err := policy.Parse("README.md", []byte(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 {
		t.Fatalf("want one policy, got %d", len(ps))
	}
}

// TestExamplePolicies loads every shipped example policy directory.
func TestExamplePolicies(t *testing.T) {
	for _, dir := range []string{"examples/policies/memory", "examples/policies/disk", "testdata/policies/multi", "testdata/policies/hostpath-only.yaml"} {
		if _, err := policy.Load(testkit.Path(dir)); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}
