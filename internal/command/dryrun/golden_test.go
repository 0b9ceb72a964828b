package dryrun

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// runCLI runs the command in process, under a root named as the command
// line binary, and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := command.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	root := &cobra.Command{Use: "kubectl-sandbox_webhook"}
	root.AddCommand(NewCommand(streams))
	command.Prepare(root, streams)
	code := command.Execute(root, args, streams)
	return out.String(), errOut.String(), code
}

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
			stdout, stderr, code := runCLI(t, "", args...)
			golden.Compare(t, c.Output, []byte(stdout))
			golden.Compare(t, c.Report, []byte(fmt.Sprintf("%sexit code: %d\n", stderr, code)))
		})
	}
}
