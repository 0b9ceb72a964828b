package serve

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
)

func parseCertificates(t *testing.T, env string, args ...string) (*certs.Options, error) {
	t.Helper()
	t.Setenv("POD_NAMESPACE", env)
	o := certs.NewOptions()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	certificateFlags(fs, o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, nil
}

func TestCertificateFlagsValidate(t *testing.T) {
	cases := []struct {
		name string
		env  string // $POD_NAMESPACE
		args []string
		want []string // substrings of the error, one per problem; none means valid
	}{
		{name: "default is files", args: nil},
		{name: "files with POD_NAMESPACE", env: "sandbox-webhook"},
		{name: "files rejects mode flags", args: []string{"--cert-secret=s", "--webhook-config=w", "--service-name=svc", "--certificate=c", "--cert-extra-dns-name=localhost"}, want: []string{
			"--cert-secret has no effect with --cert-mode=files",
			"--webhook-config has no effect with --cert-mode=files",
			"--service-name has no effect with --cert-mode=files",
			"--certificate has no effect with --cert-mode=files",
			"--cert-extra-dns-name has no effect with --cert-mode=files",
		}},
		{name: "self-managed complete", env: "sw", args: []string{"--cert-mode=self-managed", "--cert-secret=sandbox-webhook-tls", "--webhook-config=sandbox-webhook", "--service-name=sandbox-webhook"}},
		{name: "self-managed with explicit namespace and extra names", args: []string{"--cert-mode", "self-managed", "--namespace", "sw", "--cert-secret", "s", "--webhook-config", "w", "--service-name", "svc", "--cert-extra-dns-name", "localhost,webhook.example"}},
		{name: "self-managed missing everything", args: []string{"--cert-mode=self-managed"}, want: []string{
			"--cert-mode=self-managed needs --cert-secret",
			"--cert-mode=self-managed needs --webhook-config",
			"--cert-mode=self-managed needs --service-name",
			"--cert-mode=self-managed needs --namespace (or $POD_NAMESPACE)",
		}},
		{name: "self-managed with a certificate", env: "sw", args: []string{"--cert-mode=self-managed", "--cert-secret=s", "--webhook-config=w", "--service-name=svc", "--certificate=c"}, want: []string{
			"--certificate has no effect with --cert-mode=self-managed",
		}},
		{name: "cert-manager minimal", env: "sw", args: []string{"--cert-mode=cert-manager", "--certificate=sandbox-webhook"}},
		{name: "cert-manager with webhook config", env: "sw", args: []string{"--cert-mode=cert-manager", "--certificate=c", "--webhook-config=w"}},
		{name: "cert-manager missing certificate and namespace", args: []string{"--cert-mode=cert-manager"}, want: []string{
			"--cert-mode=cert-manager needs --certificate",
			"--cert-mode=cert-manager needs --namespace (or $POD_NAMESPACE)",
		}},
		{name: "cert-manager with self-managed flags", env: "sw", args: []string{"--cert-mode=cert-manager", "--certificate=c", "--cert-secret=s", "--service-name=svc", "--cert-extra-dns-name=localhost"}, want: []string{
			"--cert-secret has no effect with --cert-mode=cert-manager",
			"--service-name has no effect with --cert-mode=cert-manager",
			"--cert-extra-dns-name has no effect with --cert-mode=cert-manager",
		}},
		{name: "invalid names", env: "Bad_NS", args: []string{"--cert-mode=self-managed", "--cert-secret=UPPER", "--webhook-config=a/b", "--service-name=1svc", "--cert-extra-dns-name=-x"}, want: []string{
			`--namespace "Bad_NS"`,
			`--cert-secret "UPPER"`,
			`--webhook-config "a/b"`,
			`--service-name "1svc"`,
			`--cert-extra-dns-name "-x"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseCertificates(t, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("Validate() gave %d errors, want %d:\n%s", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCertificateFlags(t *testing.T) {
	if _, err := parseCertificates(t, "", "--cert-mode=certmanager"); err == nil || !strings.Contains(err.Error(), "must be one of files|self-managed|cert-manager") {
		t.Errorf("unknown mode: %v", err)
	}
	o, err := parseCertificates(t, "from-env")
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != certs.ModeFiles || o.Namespace != "from-env" {
		t.Errorf("defaults: mode %q namespace %q", o.Mode, o.Namespace)
	}
	o, err = parseCertificates(t, "from-env", "--namespace=flag", "--cert-mode=cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != certs.ModeCertManager || o.Namespace != "flag" {
		t.Errorf("flags: mode %q namespace %q", o.Mode, o.Namespace)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	certificateFlags(fs, certs.NewOptions())
	if got := fs.Lookup("cert-mode").DefValue; got != "files" {
		t.Errorf("--cert-mode default shown as %q", got)
	}
	for _, name := range []string{"cert-mode", "namespace", "cert-secret", "webhook-config", "service-name", "certificate", "cert-extra-dns-name"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s is missing", name)
		}
	}
}
