package certs

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
)

func parse(t *testing.T, env string, args ...string) (*Options, error) {
	t.Helper()
	t.Setenv("POD_NAMESPACE", env)
	o := NewOptions()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, nil
}

func TestOptionsValidate(t *testing.T) {
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
			o, err := parse(t, tc.env, tc.args...)
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

func TestOptionsFlags(t *testing.T) {
	if _, err := parse(t, "", "--cert-mode=certmanager"); err == nil || !strings.Contains(err.Error(), "must be one of files|self-managed|cert-manager") {
		t.Errorf("unknown mode: %v", err)
	}
	o, err := parse(t, "from-env")
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != ModeFiles || o.Namespace != "from-env" {
		t.Errorf("defaults: mode %q namespace %q", o.Mode, o.Namespace)
	}
	o, err = parse(t, "from-env", "--namespace=flag", "--cert-mode=cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode != ModeCertManager || o.Namespace != "flag" {
		t.Errorf("flags: mode %q namespace %q", o.Mode, o.Namespace)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	if got := fs.Lookup("cert-mode").DefValue; got != "files" {
		t.Errorf("--cert-mode default shown as %q", got)
	}
	for _, name := range []string{"cert-mode", "namespace", "cert-secret", "webhook-config", "service-name", "certificate", "cert-extra-dns-name"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s is missing", name)
		}
	}
}

func TestOptionsRBAC(t *testing.T) {
	files := &Options{Mode: ModeFiles}
	if r, c := files.RBAC(); len(r) != 0 || len(c) != 0 {
		t.Errorf("files mode needs no RBAC, got %v %v", r, c)
	}
	cm := &Options{Mode: ModeCertManager, Namespace: "ns", Certificate: "crt"}
	if r, c := cm.RBAC(); len(r) != 1 || len(c) != 0 || r[0].ResourceNames[0] != "crt" {
		t.Errorf("cert-manager without --webhook-config: %v %v", r, c)
	}
	cm.WebhookConfig = "mwc"
	if _, c := cm.RBAC(); len(c) != 1 || c[0].ResourceNames[0] != "mwc" || strings.Join(c[0].Verbs, ",") != "list,watch" {
		t.Errorf("cert-manager with --webhook-config: %v", c)
	}
	sm := &Options{Mode: ModeSelfManaged, Namespace: "ns", Secret: "s", WebhookConfig: "mwc", ServiceName: "svc"}
	r, c := sm.RBAC()
	for _, rules := range [][]string{verbs(r), verbs(c)} {
		for _, v := range rules {
			if v == "create" || v == "delete" || v == "patch" || v == "get" || v == "*" {
				t.Errorf("self-managed asks for %q", v)
			}
		}
	}
}

func verbs(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Verbs...)
	}
	return out
}
