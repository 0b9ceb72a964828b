package testcmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
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
