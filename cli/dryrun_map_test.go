package cli

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
)

// TestDryRunMAP: dry-run --map reports, for every corpus pod under every
// policy set that exports without gaps, that the exported MAP gives the
// webhook's pod; the -o output is the webhook's, unchanged by --map.
func TestDryRunMAP(t *testing.T) {
	for _, c := range golden.Cases(t) {
		if c.Set.Name == "multi" {
			continue // has gaps: TestDryRunMAPGaps
		}
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			args := []string{"dry-run", "--map", "-f", golden.Path(c.Input), "--namespaces", golden.Path(golden.Namespaces)}
			for _, p := range c.Set.Policies {
				args = append(args, "--policy", golden.Path(p))
			}
			if c.Set.LeakMitigation != "" {
				args = append(args, "--leak-mitigation="+c.Set.LeakMitigation)
			}
			stdout, stderr, code := runCLI(t, "", args...)
			if code != ExitOK {
				t.Fatalf("exit code %d:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, ": the MAP gives the same pod as the webhook\n") {
				t.Errorf("no agreement reported:\n%s", stderr)
			}
			plain, _, _ := runCLI(t, "", append(args[:1], args[2:]...)...)
			if stdout != plain {
				t.Errorf("--map changed the output:\n%s\nwithout --map:\n%s", stdout, plain)
			}
		})
	}
}

// TestDryRunMAPGaps: with gaps, dry-run --map names them and shows how the
// partial export's pod differs.
func TestDryRunMAPGaps(t *testing.T) {
	_, stderr, code := runCLI(t, "", "dry-run", "--map", "-p", golden.Path("testdata/policies/multi"),
		"-f", golden.Path("testdata/pods/basic.yaml"))
	if code != ExitOK {
		t.Fatalf("exit code %d:\n%s", code, stderr)
	}
	for _, want := range []string{
		`  gap: policy "c-shadow": enforcement: shadow`,
		`  gap: policy "b-extra": several enforcing policies (a-uv-cache, b-extra)`,
		"Pod sandboxes/basic: the MAP gives a different pod (-webhook +MAP):\n--- webhook/Pod sandboxes/basic\n+++ map/Pod sandboxes/basic\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
