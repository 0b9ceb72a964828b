package charts

import (
	"slices"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/cmd/webhook/webhookcmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/serve"
)

// TestArgsParseWithServe parses the container args of every certificate mode with the real
// command line: `serve` exists on the image's binary (sandbox-webhook), every flag exists and
// its value has the right type, and the certificate flags pass their mode's validation (with --namespace from
// $POD_NAMESPACE, as in the pod).
func TestArgsParseWithServe(t *testing.T) {
	for name, values := range map[string]string{
		"certManager":      ``,
		"selfManaged":      `certificates: {mode: selfManaged}`,
		"existingSecret":   `{certificates: {mode: existingSecret, existingSecret: {secretName: my-tls}}, webhook: {caBundle: Q0EK}}`,
		"extraArgs":        `server: {extraArgs: ["--max-request-bytes=6Mi"], logLevel: debug, tlsMinVersion: "1.2"}`,
		"allowedHostPaths": `policies: {allowedHostPaths: [/mnt/shared, /srv/data]}`,
	} {
		t.Run(name, func(t *testing.T) {
			args := deploymentContainer(t, mustRender(t, values)).Args

			root := webhookcmd.NewCommand(command.IOStreams{})
			cmd, rest, err := root.Find(args)
			if err != nil || cmd.Name() != "serve" {
				t.Fatalf("%q does not run serve: %v", args, err)
			}
			certOpts := certs.NewOptions()
			serve := serve.NewCommand(certOpts)
			if err := serve.ParseFlags(rest); err != nil {
				t.Fatalf("serve rejects the chart's args %q: %v", rest, err)
			}
			if n := serve.Flags().NArg(); n != 0 {
				t.Errorf("serve takes no arguments; the chart passes %q", serve.Flags().Args())
			}
			certOpts.Namespace = namespace
			if err := certOpts.Validate(); err != nil {
				t.Errorf("certificate flags %q: %v", rest, err)
			}
			if name == "allowedHostPaths" {
				got, err := serve.Flags().GetStringSlice("allowed-host-path")
				if err != nil || !slices.Equal(got, []string{"/mnt/shared", "/srv/data"}) {
					t.Errorf("--allowed-host-path = %q (%v), want the two values", got, err)
				}
			}
		})
	}
}

// TestArgsParseRejectsUnknownFlag guards the test above: an unknown flag is an error.
func TestArgsParseRejectsUnknownFlag(t *testing.T) {
	args := deploymentContainer(t, mustRender(t, `server: {extraArgs: ["--no-such-flag=1"]}`)).Args
	if err := serve.NewCommand(nil).ParseFlags(args[1:]); err == nil {
		t.Fatal("serve accepted --no-such-flag")
	}
}
