//go:build nomap

package cli

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
)

// TestServerBuild: a -tags nomap build refuses dry-run --map, before reading
// policies or input, with an error that says what is left out and how to get
// it; dry-run without --map and version work, version naming the build.
// make test runs it (go test -tags nomap ./cli/).
func TestServerBuild(t *testing.T) {
	memory, pod := golden.Path("examples/policies/memory"), golden.Path("testdata/pods/basic.yaml")

	stdout, stderr, code := runCLI(t, "", "dry-run", "--map", "-p", memory, "-f", pod)
	if code != ExitError {
		t.Errorf("dry-run --map: exit code %d, want %d", code, ExitError)
	}
	if want := "Error: " + errNoMAPRunner.Error() + "\n"; stderr != want {
		t.Errorf("dry-run --map: stderr\n%q\nwant\n%q", stderr, want)
	}
	for _, want := range []string{"-tags nomap", "make build", "go install ./cmd/webhook"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("dry-run --map: the error does not say %q", want)
		}
	}
	if stdout != "" {
		t.Errorf("dry-run --map printed:\n%s", stdout)
	}

	// The refusal comes before the input is read.
	if _, stderr, _ := runCLI(t, "", "dry-run", "--map", "-p", memory, "-f", "/nonexistent.yaml"); strings.Contains(stderr, "/nonexistent.yaml") {
		t.Errorf("dry-run --map read its input first:\n%s", stderr)
	}

	stdout, stderr, code = runCLI(t, "", "dry-run", "-p", memory, "-f", pod)
	if code != ExitOK || !strings.Contains(stdout, "UV_LINK_MODE") || !strings.Contains(stderr, "sandbox-seed") {
		t.Errorf("dry-run: exit code %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	stdout, _, code = runCLI(t, "", "version")
	if code != ExitOK || stdout != version+" (nomap: without dry-run --map)\n" {
		t.Errorf("version printed %q (exit code %d)", stdout, code)
	}
}
