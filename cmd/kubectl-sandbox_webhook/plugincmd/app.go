// Package plugincmd is the kubectl-sandbox_webhook command, sandbox-webhook's
// command line and kubectl plugin: dry-run, validate, test, check,
// export-map and version. Each command lives in internal/command/<command>.
package plugincmd

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/check"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/dryrun"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/exportmap"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/importkyverno"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/testcmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/validate"
)

// NewCommand returns the kubectl-sandbox_webhook command with every
// subcommand.
func NewCommand(streams command.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   PluginBinary,
		Short: "Try, test and check sandbox-webhook policies",
		Long: `sandbox-webhook patches every sandbox pod at CREATE, driven by SandboxPolicy
files: a uv cache emptyDir (tmpfs, or disk in leak-mitigation mode),
UV_LINK_MODE=copy, a pod-level memory headroom and read-only pre-staged data.
This command applies the same policies offline, tests them, checks a
cluster and exports them to MutatingAdmissionPolicies.

Try a policy offline before installing it:
  kubectl-sandbox_webhook dry-run --policy examples/policies/memory -f examples/pods/sandbox.yaml`,
	}
	root.AddCommand(
		dryrun.NewCommand(streams),
		validate.NewCommand(streams),
		testcmd.NewCommand(streams),
		check.NewCommand(streams),
		exportmap.NewCommand(),
		importkyverno.NewCommand(streams),
		command.NewVersionCommand(streams),
	)
	// After the subcommands are added: their examples are renamed too.
	setPluginName(root, os.Args[0])
	command.Prepare(root, streams)
	return root
}

// Main runs the command line and returns the process exit code.
func Main(args []string, streams command.IOStreams) int {
	return command.Execute(NewCommand(streams), args, streams)
}
