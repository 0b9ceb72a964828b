// Package commandtest runs the command line in process for tests: the test
// kit's part that builds commands (internal/testkit has the rest). It is a
// command package, under internal/command, because only those may import
// cobra or internal/command (cmd/webhook's TestCobraOnlyInCommands); that
// keeps cobra out of the kit the e2e harness and the load generator link.
package commandtest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
)

// Main runs a command line (args without the binary's name) on streams and
// returns its exit code, as a binary's app.Main does.
type Main func(args []string, streams command.IOStreams) int

// RunCLI runs the command line main in process with stdin on its standard
// input, and returns its stdout, its stderr and its exit code.
func RunCLI(t testing.TB, main Main, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = main(args, command.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}

// Subcommand is the command line with one subcommand, the one newCommand
// makes: under a root named as the command line binary
// (kubectl-sandbox_webhook), prepared and executed as the binary does, for
// the tests of a subcommand's package, which cannot import the binary.
func Subcommand(newCommand func(command.IOStreams) *cobra.Command) Main {
	return func(args []string, streams command.IOStreams) int {
		root := &cobra.Command{Use: "kubectl-sandbox_webhook"}
		root.AddCommand(newCommand(streams))
		command.Prepare(root, streams)
		return command.Execute(root, args, streams)
	}
}
