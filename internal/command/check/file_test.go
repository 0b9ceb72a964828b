package check

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestFileErrors: check -f says what is wrong with the file before it
// connects to any cluster (here there is none).
func TestFileErrors(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	list := filepath.Join(t.TempDir(), "list.yaml")
	if err := os.WriteFile(list, []byte("apiVersion: v1\nkind: List\nitems: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pods := testkit.Path("examples/pods")
	for file, want := range map[string]string{
		list: "Error: " + list + ": holds a List; this takes one object, a pod or a workload (dry-run -f takes Lists)\n",
		pods: "Error: " + pods + ": is a directory; this takes one file holding one object (dry-run -f takes directories)\n",
	} {
		_, stderr, code := commandtest.RunCLI(t, commandtest.Subcommand(NewCommand), "", "check", "-f", file, "-p", testkit.Path("examples/policies/memory"))
		if code != command.ExitError || stderr != want {
			t.Errorf("check -f %s: exit code %d, stderr %q; want %q", file, code, stderr, want)
		}
	}
}
