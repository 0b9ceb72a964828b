package command

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spf13/cobra"
)

// TestExecuteEscapesErrors: errors quote their input (file names, case
// names, fields of a pod); printed, they keep their lines and lose their
// control characters.
func TestExecuteEscapesErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	streams := IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
	root := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error {
		return errors.New("file \x1b[2Jp.yaml: bad\r\n\tsecond problem")
	}}
	Prepare(root, streams)
	if code := Execute(root, nil, streams); code != ExitError {
		t.Errorf("exit code %d, want %d", code, ExitError)
	}
	if want := "Error: file \\x1b[2Jp.yaml: bad\\x0d\n\tsecond problem\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
}

// TestArgumentErrors: a command that takes arguments says which when they
// are missing; one that takes none says so.
func TestArgumentErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "pod"}, "Error: accepts 1 arg(s), received 0; usage: tool check pod NAME [flags]\n"},
		{[]string{"check", "pod", "a", "b"}, "Error: accepts 1 arg(s), received 2; usage: tool check pod NAME [flags]\n"},
		{[]string{"check", "x"}, `Error: unknown command "x" for "tool check"; "tool check --help" lists the commands` + "\n"},
	} {
		root := &cobra.Command{Use: "tool"}
		check := &cobra.Command{Use: "check", RunE: func(*cobra.Command, []string) error { return nil }, Args: cobra.NoArgs}
		check.AddCommand(&cobra.Command{Use: "pod NAME", Args: cobra.ExactArgs(1), RunE: func(*cobra.Command, []string) error { return nil }})
		root.AddCommand(check)
		var out, errOut bytes.Buffer
		streams := IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}
		Prepare(root, streams)
		if code := Execute(root, c.args, streams); code != ExitUsage || errOut.String() != c.want {
			t.Errorf("%q: exit code %d, stderr %q; want %d, %q", c.args, code, errOut.String(), ExitUsage, c.want)
		}
	}
}
