package serve

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-webhook/sandbox-webhook/internal/server"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// parse runs serve's flag resolution over args, env and an optional config
// file, and returns the resulting Options.
func parse(t *testing.T, args []string, env map[string]string, config string) (server.Options, error) {
	t.Helper()
	cmd := NewCommand(nil)
	if config != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	fs := cmd.Flags()
	if err := fs.Parse(args); err != nil {
		return server.Options{}, err
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := resolveFlags(fs, lookup); err != nil {
		return server.Options{}, err
	}
	return flagValuesOf(t, cmd.Flags()).options(fs)
}

// flagValuesOf rebuilds the flag values from the resolved flag set, since
// the command's own are private to its closure.
func flagValuesOf(t *testing.T, fs *pflag.FlagSet) *flagValues {
	t.Helper()
	must := func(v any, err error) any {
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return &flagValues{
		Options: server.Options{
			PolicyPaths:            must(fs.GetStringSlice("policy")).([]string),
			AllowEmptyPolicies:     must(fs.GetBool("allow-empty-policies")).(bool),
			LeakMitigation:         mutate.LeakMitigation(must(fs.GetString("leak-mitigation")).(string)),
			LeakMitigationFile:     must(fs.GetString("leak-mitigation-file")).(string),
			CertDir:                must(fs.GetString("cert-dir")).(string),
			BindAddress:            must(fs.GetString("bind-address")).(string),
			Port:                   must(fs.GetInt("port")).(int),
			MetricsBindAddress:     must(fs.GetString("metrics-bind-address")).(string),
			HealthProbeBindAddress: must(fs.GetString("health-probe-bind-address")).(string),
			ExcludeNamespaces:      must(fs.GetStringSlice("exclude-namespace")).([]string),
			AllowedHostPaths:       must(fs.GetStringSlice("allowed-host-path")).([]string),
			ReadTimeout:            must(fs.GetDuration("read-timeout")).(time.Duration),
			WriteTimeout:           must(fs.GetDuration("write-timeout")).(time.Duration),
			ShutdownDelay:          must(fs.GetDuration("shutdown-delay")).(time.Duration),
			ReloadInterval:         must(fs.GetDuration("reload-interval")).(time.Duration),
		},
		kubeconfig:      must(fs.GetString("kubeconfig")).(string),
		tlsMinVersion:   must(fs.GetString("tls-min-version")).(string),
		maxRequestBytes: must(fs.GetString("max-request-bytes")).(string),
		logLevel:        must(fs.GetString("log-level")).(string),
	}
}

func TestFlagPrecedence(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	config := `
policy: [/config/a, /config/b]
leak-mitigation: "on"
port: 10443
max-request-bytes: 1048576
tls-min-version: "1.2"
shutdown-delay: 7s
exclude-namespace: [from-config]
`
	env := map[string]string{
		"SANDBOX_WEBHOOK_LEAK_MITIGATION": "off",
		"SANDBOX_WEBHOOK_PORT":            "11443",
		"SANDBOX_WEBHOOK_POLICY":          "/env/a,/env/b",
	}
	o, err := parse(t, []string{"--port", "12443"}, env, config)
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 12443 {
		t.Errorf("port = %d: the flag must win", o.Port)
	}
	if o.LeakMitigation != mutate.LeakMitigationOff || !reflect.DeepEqual(o.PolicyPaths, []string{"/env/a", "/env/b"}) {
		t.Errorf("leak=%s policies=%v: the environment must win over the config file", o.LeakMitigation, o.PolicyPaths)
	}
	if o.MaxRequestBytes != 1<<20 || o.TLSMinVersion != 0x0303 || o.ShutdownDelay != 7*time.Second ||
		!reflect.DeepEqual(o.ExcludeNamespaces, []string{"from-config"}) {
		t.Errorf("config file values not applied: %+v", o)
	}
	if o.MetricsBindAddress != ":8080" || o.HealthProbeBindAddress != ":8081" || o.BindAddress != "0.0.0.0" {
		t.Errorf("defaults: %+v", o)
	}
}

func TestExcludeNamespaceDefault(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "sandbox-webhook")
	o, err := parse(t, []string{"--policy", "p"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o.ExcludeNamespaces, []string{"sandbox-webhook"}) {
		t.Errorf("exclude = %v, want the pod's own namespace", o.ExcludeNamespaces)
	}
	o, err = parse(t, []string{"--policy", "p", "--exclude-namespace", "x", "--exclude-namespace", "y"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o.ExcludeNamespaces, []string{"x", "y"}) {
		t.Errorf("exclude = %v", o.ExcludeNamespaces)
	}
}

func TestMaxRequestBytesQuantity(t *testing.T) {
	o, err := parse(t, []string{"--max-request-bytes", "2Mi"}, nil, "")
	if err != nil || o.MaxRequestBytes != 2<<20 {
		t.Errorf("2Mi: %d %v", o.MaxRequestBytes, err)
	}
}

func TestBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		config string
		want   string
	}{
		{"unknown config key", nil, nil, "leak-mitigaton: on\n", `unknown key "leak-mitigaton"`},
		{"config sets config", nil, nil, "config: x\n", `unknown key "config"`},
		{"config not a map", nil, nil, "- a\n", "--config"},
		{"bad env value", nil, map[string]string{"SANDBOX_WEBHOOK_PORT": "many"}, "", "SANDBOX_WEBHOOK_PORT"},
		{"bad config value", nil, nil, "port: many\n", "port:"},
		{"bad leak mitigation", []string{"--leak-mitigation", "maybe"}, nil, "", `invalid argument "maybe" for "--leak-mitigation" flag: must be on, off or policy`},
		{"bad leak mitigation from the environment", nil, map[string]string{"SANDBOX_WEBHOOK_LEAK_MITIGATION": "maybe"}, "",
			`invalid environment: SANDBOX_WEBHOOK_LEAK_MITIGATION="maybe": invalid argument "maybe" for "--leak-mitigation" flag: must be on, off or policy`},
		{"bad leak mitigation from the config file", nil, nil, "leak-mitigation: maybe\n", `leak-mitigation: invalid argument "maybe" for "--leak-mitigation" flag: must be on, off or policy`},
		{"bad TLS version", []string{"--tls-min-version", "1.1"}, nil, "", "--tls-min-version"},
		{"bad size", []string{"--max-request-bytes", "lots"}, nil, "", "--max-request-bytes"},
		{"relative allowed host path", []string{"--allowed-host-path", "mnt/shared"}, nil, "", `--allowed-host-path "mnt/shared"`},
		{"allowed host path /", []string{"--allowed-host-path", "/"}, nil, "", `--allowed-host-path "/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.args, tc.env, tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	cmd := NewCommand(nil)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{
		"--policy", "--leak-mitigation-file", "--cert-dir", "--bind-address", "--port", "--metrics-bind-address",
		"--health-probe-bind-address", "--kubeconfig", "--exclude-namespace", "--tls-min-version",
		"--max-request-bytes", "--allowed-host-path", "--log-level", "--config", "SANDBOX_WEBHOOK_", "/readyz", "/status",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if len(line) > 200 {
			t.Errorf("--help line of %d characters: %s", len(line), line)
		}
	}
}

// TestServeCommandFailsFast runs the command with settings that cannot
// work: it returns the error, it does not exit.
func TestServeCommandFailsFast(t *testing.T) {
	// The command sets the process's loggers, which goroutines of the
	// stopped managers of earlier tests (their event recorders') still
	// read: it runs in a process of its own, as in production.
	const child = "SERVE_TEST_FAILS_FAST_CHILD"
	if os.Getenv(child) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServeCommandFailsFast$", "-test.count=1")
		cmd.Env = append(os.Environ(), child+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	cmd := NewCommand(nil)
	var errOut bytes.Buffer
	cmd.SetErr(&errOut)
	cmd.SetOut(&errOut)
	cmd.SetArgs([]string{"--policy", "p", "--kubeconfig", filepath.Join(t.TempDir(), "missing")})
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Kubernetes client configuration") {
		t.Errorf("error = %v", err)
	}
}
