package dryrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestReportWithItsObject: where stdout and stderr are one file (a terminal,
// or 2>&1), each pod's report is followed by its own diff, as the README
// shows, instead of all diffs, then all reports.
func TestReportWithItsObject(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	streams := command.IOStreams{In: strings.NewReader(""), Out: f, ErrOut: f}
	if code := cli([]string{"dry-run", "-p", testkit.Path("examples/policies/memory"),
		"-f", testkit.Path("examples/pods/sandbox.yaml"), "-f", testkit.Path("examples/pods/ordinary.yaml"), "-o", "diff"}, streams); code != command.ExitOK {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	order := []string{"Pod default/rollout-(generated):\n", "--- a/Pod default/rollout-(generated)\n", "Pod default/ordinary:\n"}
	last := -1
	for _, s := range order {
		i := strings.Index(out, s)
		if i < 0 || i < last {
			t.Fatalf("want %q in this order:\n%s", order, out)
		}
		last = i
	}
}
