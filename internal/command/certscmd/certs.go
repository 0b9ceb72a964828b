// Package certscmd is the certs command group of the server binary:
// `certs generate` writes a CA and a serving certificate for a webhook run
// outside a cluster (the demo and the e2e suite use it).
package certscmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
)

// NewCommand returns the `certs` command group; `certs generate` writes a CA and
// a serving certificate for a local webhook (the demo and the e2e suite use it).
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Certificate helpers for running the webhook",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newGenerateCommand())
	return cmd
}

func newGenerateCommand() *cobra.Command {
	opts := certs.GenerateOptions{Validity: certs.DefaultValidity}
	cmd := &cobra.Command{
		Use:   "generate --out-dir DIR --host HOST [--host HOST...] [--validity 8760h]",
		Short: "Write a fresh CA (ca.crt) and a serving certificate signed by it (tls.crt, tls.key)",
		Long: `Write a fresh CA certificate and a serving certificate signed by it into --out-dir:
ca.crt (the webhook configuration's caBundle), tls.crt and tls.key (the server's --cert-dir).
IP addresses given as --host become IP SANs, names become DNS SANs. Keys are ECDSA P-256;
the CA's key is discarded, so ca.crt vouches for this one serving certificate only.
Existing files in --out-dir are kept, and the command fails, unless --force.`,
		Example: `  sandbox-webhook certs generate --out-dir /tmp/certs --host 127.0.0.1 --host localhost
  sandbox-webhook certs generate --out-dir certs --host sandbox-webhook.sandbox-webhook.svc --validity 720h`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return cmd.FlagErrorFunc()(cmd, err)
			}
			if err := certs.Generate(opts); err != nil {
				return fmt.Errorf("certs generate: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s, %s and %s to %s\n", certs.CAFile, certs.CertFile, certs.KeyFile, opts.OutDir)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.OutDir, "out-dir", "", "directory to write ca.crt, tls.crt and tls.key into (created when missing)")
	fs.StringArrayVar(&opts.Hosts, "host", nil, "subject alternative name of the serving certificate (repeatable; IP addresses become IP SANs)")
	fs.DurationVar(&opts.Validity, "validity", certs.DefaultValidity, "how long the CA and the serving certificate are valid")
	fs.BoolVar(&opts.Force, "force", false, "replace an existing ca.crt, tls.crt and tls.key in --out-dir (the old CA cannot be had again)")
	return cmd
}
