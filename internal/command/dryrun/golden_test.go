package dryrun

import (
	"fmt"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// cli is the command line with dry-run its one subcommand.
var cli = commandtest.Subcommand(NewCommand)

// TestGoldenCorpus runs dry-run on every corpus pod under every policy set:
// stdout must be the golden mutated pod, stderr the golden report (decisions,
// warnings, --predict verdict) and exit code.
func TestGoldenCorpus(t *testing.T) {
	golden.CheckStale(t)
	for _, c := range golden.Cases(t) {
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			args := []string{"dry-run", "-f", testkit.Path(c.Input), "--namespaces", testkit.Path(golden.Namespaces), "--predict"}
			for _, p := range c.Set.Policies {
				args = append(args, "--policy", testkit.Path(p))
			}
			if c.Set.LeakMitigation != "" {
				args = append(args, "--leak-mitigation="+c.Set.LeakMitigation)
			}
			stdout, stderr, code := commandtest.RunCLI(t, cli, "", args...)
			golden.Compare(t, c.Output, []byte(stdout))
			golden.Compare(t, c.Report, []byte(fmt.Sprintf("%sexit code: %d\n", stderr, code)))
		})
	}
}
