// Command kubectl-sandbox_webhook is sandbox-webhook's command line for
// people and CI: policies tried offline (dry-run, validate, test), the
// cluster checked (check), and the export to MutatingAdmissionPolicies
// (export-map). On the PATH it is also the kubectl plugin
// `kubectl sandbox-webhook`. See `kubectl-sandbox_webhook --help`.
package main

import (
	"os"

	"github.com/sandbox-webhook/sandbox-webhook/cmd/kubectl-sandbox_webhook/plugincmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
)

func main() {
	os.Exit(plugincmd.Main(os.Args[1:], command.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
