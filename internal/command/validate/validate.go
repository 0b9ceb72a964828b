// Package validate is the validate command: policy files and directories
// loaded as the server loads them, every problem reported.
package validate

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/internal/output"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// NewCommand returns the validate command.
func NewCommand(streams command.IOStreams) *cobra.Command {
	var allowed []string
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check policy files and directories",
		Long: `Load policy files and directories exactly as the server does and report every
problem with its file, document, field path and what is allowed. Exits 1 when
any policy is invalid. --allowed-host-path refuses hostPath assets outside the
named directories, as serve does with the same flag.`,
		Example: `  kubectl-sandbox_webhook validate examples/policies/memory examples/policies/disk/sandbox-seed.yaml
  kubectl-sandbox_webhook validate --allowed-host-path /mnt/shared examples/policies/memory`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return command.UsageErrorf("validate needs at least one policy file or directory")
			}
			if err := policy.CheckAllowedHostPaths(allowed); err != nil {
				return command.UsageErrorf("%v", err)
			}
			// Each argument is its own set: a memory and a disk variant of the
			// same policy may share a name without being loaded together.
			// Every path is checked, and every problem reported at once.
			var problems []error
			out := output.NewTextWriter(streams.Out) // file names are the user's, not always printable
			for _, path := range args {
				set, err := policy.Load(path)
				if err == nil {
					err = policy.AllowHostPaths(set, allowed)
				}
				if err != nil {
					problems = append(problems, err)
					continue
				}
				for _, p := range set.Policies {
					fmt.Fprintf(out, "%s: policy %s (hash %s) is valid\n", p.Source, p.Name(), p.Hash)
				}
			}
			return errors.Join(problems...)
		},
	}
	flags.AllowedHostPath(cmd.Flags(), &allowed)
	return cmd
}
