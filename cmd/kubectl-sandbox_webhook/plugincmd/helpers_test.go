package plugincmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/cmd/webhook/webhookcmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
)

// runCLI runs the command line in-process and returns stdout, stderr and the
// exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, command.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}

// runServer runs the server binary's command line (sandbox-webhook) in
// process, as runCLI does.
func runServer(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := webhookcmd.Main(args, command.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}
