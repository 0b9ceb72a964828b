package cli

import (
	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/server"
)

// extraCommands are the commands other packages provide: the admission
// server, with the certificate modes plugged in, and the certificate tools.
func extraCommands() []*cobra.Command {
	return []*cobra.Command{
		server.NewCommand(certs.NewOptions()),
		certs.NewCommand(),
		mapexport.NewCommand(),
	}
}
