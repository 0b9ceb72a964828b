package e2e

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestServerBuild: the binary under test is the container image's build
// (-tags nomap). dry-run --map, left out of it, exits non-zero with an error
// that says so and how to get a full build, and prints nothing on stdout;
// dry-run without --map still mutates the pod; version names the build.
func TestServerBuild(t *testing.T) {
	ctx := t.Context()
	policy, pod := golden.Path("examples/policies/memory"), golden.Path("testdata/pods/basic.yaml")

	r, err := harness.RunCommand(ctx, suite.binary, "dry-run", "--map", "-p", policy, "-f", pod)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode == 0 {
		t.Errorf("dry-run --map exited 0:\n%s", r.Stderr)
	}
	for _, want := range []string{
		"Error: dry-run --map runs exported policies with kube-apiserver's code, which this build leaves out",
		"built with -tags nomap, as the container image is",
		"use a full build: make build or go install ./cmd/webhook",
	} {
		if !strings.Contains(string(r.Stderr), want) {
			t.Errorf("dry-run --map: stderr does not say %q:\n%s", want, r.Stderr)
		}
	}
	if len(r.Stdout) > 0 {
		t.Errorf("dry-run --map printed:\n%s", r.Stdout)
	}

	out, err := harness.Run(ctx, suite.binary, "dry-run", "-p", policy, "-f", pod)
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

	out, err = harness.Run(ctx, suite.binary, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(out), " (nomap: without dry-run --map)\n") {
		t.Errorf("version printed %q, want it to name the nomap build", out)
	}
}
