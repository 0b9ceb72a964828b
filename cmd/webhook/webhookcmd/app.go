// Package webhookcmd is the sandbox-webhook command, the container image's binary:
// the admission server (serve), its certificate helpers (certs) and version.
// The policy tools people run are the other binary,
// cmd/kubectl-sandbox_webhook; this one does not link them.
package webhookcmd

import (
	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/certscmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/serve"
)

// Name is the binary's name.
const Name = "sandbox-webhook"

// NewCommand returns the sandbox-webhook command with every subcommand.
func NewCommand(streams command.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   Name,
		Short: "Mutating admission webhook for RL-training sandbox pods",
		Long: `sandbox-webhook patches every sandbox pod at CREATE, driven by SandboxPolicy
files: a uv cache emptyDir (tmpfs, or disk in leak-mitigation mode),
UV_LINK_MODE=copy, a pod-level memory headroom and read-only pre-staged data.

This is the server; the offline tools (dry-run, validate, test, check,
export-map) are kubectl-sandbox_webhook:
  kubectl-sandbox_webhook dry-run --policy examples/policies/memory -f examples/pods/sandbox.yaml`,
	}
	root.AddCommand(
		serve.NewCommand(certs.NewOptions()),
		certscmd.NewCommand(),
		command.NewVersionCommand(streams),
	)
	command.Prepare(root, streams)
	return root
}

// Main runs the command line and returns the process exit code.
func Main(args []string, streams command.IOStreams) int {
	return command.Execute(NewCommand(streams), args, streams)
}
