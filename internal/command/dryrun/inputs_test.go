package dryrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestEmptyList: kubectl get of an empty namespace prints an empty List;
// dry-run passes it through and says so, instead of failing.
func TestEmptyList(t *testing.T) {
	stdout, stderr, code := commandtest.RunCLI(t, cli, "apiVersion: v1\nkind: List\nitems: []\n", "dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", "-")
	if code != command.ExitOK || stdout != "apiVersion: v1\nitems: []\nkind: List\n" || stderr != "the input's Lists hold no items: nothing to mutate\n" {
		t.Errorf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, stderr, code := commandtest.RunCLI(t, cli, "", "dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", "-"); code != command.ExitError || !strings.Contains(stderr, "no objects in the input") {
		t.Errorf("empty input: exit code %d, stderr %q", code, stderr)
	}
}

// TestNamespacesDirectory: --namespaces takes a directory, as -f does.
func TestNamespacesDirectory(t *testing.T) {
	dir := t.TempDir()
	for name, ns := range map[string]string{"a.yaml": "sandboxes", "b.yaml": "default"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code := commandtest.RunCLI(t, cli, "", "dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", testkit.Path("examples/pods/sandbox.yaml"), "--namespaces", dir, "-o", "summary")
	if code != command.ExitOK || strings.Contains(stdout, "not in --namespaces") || !strings.Contains(stdout, "changed: 1 of 1") {
		t.Errorf("exit code %d:\n%s%s", code, stdout, stderr)
	}
}
