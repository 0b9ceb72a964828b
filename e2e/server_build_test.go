package e2e

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestServerBuild: the binary under test is the container image's, the
// server alone. dry-run is not one of its commands: it exits with a usage
// error that says so and prints nothing on stdout; the command line binary
// runs dry-run, --map included; both print their version.
func TestServerBuild(t *testing.T) {
	ctx := t.Context()
	policy, pod := testkit.Path("examples/policies/memory"), testkit.Path("testdata/pods/basic.yaml")

	r, err := harness.RunCommand(ctx, suite.binary, "dry-run", "--map", "-p", policy, "-f", pod)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 2 {
		t.Errorf("the server's dry-run exited %d, want 2 (usage):\n%s", r.ExitCode, r.Stderr)
	}
	if len(r.Stdout) > 0 {
		t.Errorf("the server's dry-run printed:\n%s", r.Stdout)
	}

	out, err := harness.Run(ctx, suite.cli, "dry-run", "-p", policy, "-f", pod)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := harness.DecodePods(out)
	if err != nil || len(pods) != 1 {
		t.Fatalf("dry-run printed %d pods (%v):\n%s", len(pods), err, out)
	}
	if status := pods[0].Annotations[mutate.StatusAnnotation]; !strings.Contains(status, "sandbox-seed") {
		t.Errorf("dry-run did not mutate the pod: %s %q", mutate.StatusAnnotation, status)
	}
	r, err = harness.RunCommand(ctx, suite.cli, "dry-run", "--map", "-p", policy, "-f", pod)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 || !strings.Contains(string(r.Stderr), "the MAP gives the same pod as the webhook") {
		t.Errorf("dry-run --map exited %d:\n%s", r.ExitCode, r.Stderr)
	}

	for _, binary := range []string{suite.binary, suite.cli} {
		out, err = harness.Run(ctx, binary, "version")
		if err != nil {
			t.Fatal(err)
		}
		if v := strings.TrimSpace(string(out)); v == "" || strings.Contains(v, " ") {
			t.Errorf("%s version printed %q, want the version alone", binary, out)
		}
	}
}
