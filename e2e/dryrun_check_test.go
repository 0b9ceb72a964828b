package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestDryRunCheckPredictsValidation: for pods the apiserver refuses for
// reasons other than Pod Security and pod-level resources (unknown fields
// under strict field validation, duplicate container names, negative
// requests, requests above limits, mounts of undeclared volumes), dry-run
// --predict predicts the rejection, and it accepts a pod the apiserver accepts.
// Each pod is sent to the real apiserver as written, with a server-side dry
// run and fieldValidation=Strict, as kubectl create sends it by default.
func TestDryRunCheckPredictsValidation(t *testing.T) {
	const ns = "dry-run-check"
	ensureNamespace(t, ns, nil)
	pod := func(spec string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"` + ns + `"},"spec":` + spec + `}`
	}
	cases := []struct {
		name     string
		pod      string
		rejected bool
	}{
		{"valid", pod(`{"containers":[{"name":"c","image":"i","resources":{"requests":{"memory":"1Gi"},"limits":{"memory":"2Gi"}}}]}`), false},
		{"unknown field", pod(`{"contaners":[{"name":"c","image":"i"}],"containers":[{"name":"c","image":"i"}]}`), true},
		{"duplicate container names", pod(`{"initContainers":[{"name":"c","image":"i"}],"containers":[{"name":"c","image":"i"}]}`), true},
		{"negative request", pod(`{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"-1"}}}]}`), true},
		{"request above limit", pod(`{"containers":[{"name":"c","image":"i","resources":{"requests":{"memory":"2Gi"},"limits":{"memory":"1Gi"}}}]}`), true},
		{"undeclared volume", pod(`{"containers":[{"name":"c","image":"i","volumeMounts":[{"name":"v","mountPath":"/v"}]}]}`), true},
		{"duplicate volume names", pod(`{"containers":[{"name":"c","image":"i"}],"volumes":[{"name":"v","emptyDir":{}},{"name":"v","emptyDir":{}}]}`), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			file := filepath.Join(t.TempDir(), "pod.json")
			if err := os.WriteFile(file, []byte(c.pod), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := harness.RunCommand(ctx, suite.cli, "dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", file, "--predict", "-o", "patch")
			if err != nil {
				t.Fatal(err)
			}
			cliRejects := r.ExitCode == 3
			if r.ExitCode != 0 && !cliRejects {
				t.Fatalf("dry-run: exit code %d\n%s", r.ExitCode, r.Stderr)
			}
			apiErr := suite.cs.CoreV1().RESTClient().Post().
				Namespace(ns).Resource("pods").
				Param("dryRun", "All").Param("fieldValidation", "Strict").
				SetHeader("Content-Type", "application/json").
				Body([]byte(c.pod)).Do(ctx).Error()
			if (apiErr != nil) != c.rejected {
				t.Fatalf("the apiserver answered %v; the case says rejected=%v", apiErr, c.rejected)
			}
			if cliRejects != c.rejected {
				t.Errorf("dry-run --predict rejects=%v, the apiserver: %v\n%s", cliRejects, apiErr, r.Stderr)
			}
			if c.rejected && !strings.Contains(string(r.Stderr), "would be rejected") {
				t.Errorf("dry-run does not say why:\n%s", r.Stderr)
			}
		})
	}
}
