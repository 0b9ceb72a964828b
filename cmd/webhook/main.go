// Command sandbox-webhook is the sandbox pod mutating admission webhook: the
// container image's binary. See `sandbox-webhook --help`.
package main

import (
	"os"

	"github.com/sandbox-webhook/sandbox-webhook/cmd/webhook/webhookcmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
)

func main() {
	os.Exit(webhookcmd.Main(os.Args[1:], command.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
