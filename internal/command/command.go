// Package command holds what every sandbox-webhook command shares (the
// commands themselves are its subpackages, one each): the
// standard streams, the exit codes and usage errors, and running a root
// command to an exit code. Only main calls os.Exit; commands return errors.
package command

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/internal/version"
)

// Exit codes, documented in the README.
const (
	ExitOK          = 0 // success
	ExitError       = 1 // a policy, input or runtime error
	ExitUsage       = 2 // bad flags or arguments
	ExitRejected    = 3 // dry-run --predict predicts the apiserver rejects a pod
	ExitCheckFailed = 4 // check: the pod is not (or would not be) mutated as the policies say, or has drifted
	ExitPartial     = 5 // import --allow-partial: some parts were not converted
)

// IOStreams are the command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// ExitCodeError carries an exit code other than ExitError.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string { return e.Err.Error() }
func (e *ExitCodeError) Unwrap() error { return e.Err }

// UsageErrorf reports bad flags or arguments (exit code 2).
func UsageErrorf(format string, args ...any) error {
	return &ExitCodeError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Prepare makes root ready to run on streams: it writes to them, a flag
// error is a usage error, and so is every argument error of root and its
// subcommands (see UsageArgs).
func Prepare(root *cobra.Command, streams IOStreams) {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitCodeError{Code: ExitUsage, Err: err}
	})
	UsageArgs(root)
}

// UsageArgs makes every argument error of c and its subcommands a usage
// error (exit code 2) that says what the command takes. Cobra's own
// message for an extra argument is "unknown command", even where a
// command has no subcommands.
//
// A command group (the root, certs) gets one too, and prints its help when
// run without arguments: cobra would otherwise print the help, exit 0, for
// an unknown command.
func UsageArgs(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				if cmd.HasSubCommands() {
					return UsageErrorf("unknown command %q for %q; %q lists the commands", args[0], cmd.CommandPath(), cmd.CommandPath()+" --help")
				}
				if check(cmd, nil) == nil { // it takes none
					return UsageErrorf("%q takes no arguments, got %q; every input is a flag (%s --help)", cmd.CommandPath(), args, cmd.CommandPath())
				}
				return UsageErrorf("%v; usage: %s", err, cmd.UseLine())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		UsageArgs(sub)
	}
}

// Execute runs root, prepared with Prepare, with args and returns the
// process exit code; an error is printed on streams.ErrOut.
func Execute(root *cobra.Command, args []string, streams IOStreams) int {
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(streams.ErrOut, "Error: %s\n", textout.EscapeLines(err.Error())) // errors quote their input
	var ee *ExitCodeError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitError
}

// NewVersionCommand returns the version command: it prints version.Version.
func NewVersionCommand(streams IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(streams.Out, version.Version)
			return err
		},
	}
}
