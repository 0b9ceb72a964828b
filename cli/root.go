// Package cli is the sandbox-webhook command line: the root command, the
// policy dry-run and validate commands, and the wiring of the serve and certs
// commands. Only main calls os.Exit; commands return errors.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// version is stamped at build time with -ldflags -X. The version command
// prints it and, for a build with -tags nomap, buildNote.
var version = "dev"

// Exit codes, documented in the README.
const (
	ExitOK       = 0 // success
	ExitError    = 1 // a policy, input or runtime error
	ExitUsage    = 2 // bad flags or arguments
	ExitRejected = 3 // dry-run --check predicts the apiserver rejects a pod
)

// IOStreams are the command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// exitError carries an exit code other than ExitError.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// NewRootCommand returns the sandbox-webhook command with every subcommand.
func NewRootCommand(streams IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "sandbox-webhook",
		Short: "Mutating admission webhook for RL-training sandbox pods",
		Long: `sandbox-webhook patches every sandbox pod at CREATE, driven by SandboxPolicy
files: a uv cache emptyDir (tmpfs, or disk in leak-mitigation mode),
UV_LINK_MODE=copy, a pod-level memory headroom and read-only pre-staged data.

Try a policy offline before installing it:
  sandbox-webhook dry-run --policy examples/policies/memory -f examples/pods/sandbox.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	setPluginName(root)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: ExitUsage, err: err}
	})
	root.AddCommand(
		newDryRunCommand(streams),
		newValidateCommand(streams),
		newTestCommand(streams),
		newClusterCheckCommand(streams),
		newVersionCommand(streams),
	)
	for _, c := range extraCommands() {
		root.AddCommand(c)
	}
	usageArgs(root)
	return root
}

// usageArgs makes every argument error of c and its subcommands a usage
// error (exit code 2) that says what the command takes. Cobra's own
// message for an extra argument is "unknown command", even where a
// command has no subcommands.
//
// A command group (the root, certs) gets one too, and prints its help when
// run without arguments: cobra would otherwise print the help, exit 0, for
// an unknown command.
func usageArgs(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				if cmd.HasSubCommands() {
					return usageErrorf("unknown command %q for %q; %q lists the commands", args[0], cmd.CommandPath(), cmd.CommandPath()+" --help")
				}
				return usageErrorf("%q takes no arguments, got %q; every input is a flag (%s --help)", cmd.CommandPath(), args, cmd.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// Main runs the command line and returns the process exit code.
func Main(args []string, streams IOStreams) int {
	root := NewRootCommand(streams)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(streams.ErrOut, "Error: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitError
}

// usageErrorf reports bad flags or arguments (exit code 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func newVersionCommand(streams IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(streams.Out, version+buildNote)
			return err
		},
	}
}
