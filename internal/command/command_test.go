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
