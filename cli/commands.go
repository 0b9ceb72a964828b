package cli

import (
	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	certscmd "github.com/sandbox-webhook/sandbox-webhook/internal/cmd/certs"
	"github.com/sandbox-webhook/sandbox-webhook/internal/cmd/exportmap"
	"github.com/sandbox-webhook/sandbox-webhook/internal/cmd/serve"
)

// extraCommands are the commands other packages provide: the admission
// server, with the certificate modes plugged in, and the certificate tools.
func extraCommands() []*cobra.Command {
	return []*cobra.Command{
		serve.NewCommand(certs.NewOptions()),
		certscmd.NewCommand(),
		exportmap.NewCommand(),
	}
}
