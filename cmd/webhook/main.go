// Command sandbox-webhook is the sandbox pod mutating admission webhook, its
// policy dry-run CLI and its helpers. See `sandbox-webhook --help`.
package main

import (
	"os"

	"github.com/sandbox-webhook/sandbox-webhook/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
