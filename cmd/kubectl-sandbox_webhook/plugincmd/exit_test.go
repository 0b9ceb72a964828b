package plugincmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/cmd/webhook/webhookcmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestUsageExitCodes: extra arguments, missing required flags and bad
// values from the environment are usage errors (exit 2) that say what the
// command takes, before anything else is looked at, in both binaries (server
// marks the cases of sandbox-webhook, the server's); and each binary has
// only its own commands.
func TestUsageExitCodes(t *testing.T) {
	memory := testkit.Path("examples/policies/memory")
	pod := testkit.Path("testdata/pods/basic.yaml")
	out := t.TempDir()
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		message string
		absent  string
		server  bool
	}{
		{name: "dry-run extra arguments", args: []string{"dry-run", memory, pod}, code: command.ExitUsage,
			message: `"kubectl-sandbox_webhook dry-run" takes no arguments, got ["` + memory + `" "` + pod + `"]`},
		{name: "export-map extra argument", args: []string{"export-map", "--policy", memory, "extra"}, code: command.ExitUsage, message: `"kubectl-sandbox_webhook export-map" takes no arguments`},
		{name: "serve extra argument", args: []string{"serve", "--policy", memory, "extra"}, code: command.ExitUsage, message: `"sandbox-webhook serve" takes no arguments`, server: true},
		{name: "certs generate extra argument", args: []string{"certs", "generate", "--out-dir", out, "--host", "x", "extra"}, code: command.ExitUsage, message: `"sandbox-webhook certs generate" takes no arguments`, server: true},
		{name: "version extra argument", args: []string{"version", "extra"}, code: command.ExitUsage, message: `"kubectl-sandbox_webhook version" takes no arguments`},
		{name: "server version extra argument", args: []string{"version", "extra"}, code: command.ExitUsage, message: `"sandbox-webhook version" takes no arguments`, server: true},
		{name: "check pod without NAME", args: []string{"check", "pod"}, code: command.ExitUsage,
			message: "accepts 1 arg(s), received 0; usage: kubectl-sandbox_webhook check pod NAME [flags]", absent: "takes no arguments"},
		{name: "unknown command", args: []string{"frobnicate"}, code: command.ExitUsage, message: `unknown command "frobnicate" for "kubectl-sandbox_webhook"`},
		{name: "server unknown command", args: []string{"frobnicate"}, code: command.ExitUsage, message: `unknown command "frobnicate" for "sandbox-webhook"`, server: true},
		{name: "serve is the server's", args: []string{"serve"}, code: command.ExitUsage, message: `unknown command "serve" for "kubectl-sandbox_webhook"`},
		{name: "dry-run is not the server's", args: []string{"dry-run"}, code: command.ExitUsage, message: `unknown command "dry-run" for "sandbox-webhook"`, server: true},
		{name: "unknown certs command", args: []string{"certs", "frobnicate"}, code: command.ExitUsage, message: `unknown command "frobnicate" for "sandbox-webhook certs"`, server: true},
		{name: "serve without --policy", env: map[string]string{"KUBECONFIG": "/nonexistent"}, args: []string{"serve"}, code: command.ExitUsage,
			message: "--policy is required", absent: "kubeconfig", server: true},
		{name: "certs generate without flags", args: []string{"certs", "generate"}, code: command.ExitUsage, message: "--out-dir is required", server: true},
		{name: "serve bad environment value", env: map[string]string{"SANDBOX_WEBHOOK_LEAK_MITIGATION": "sideways"}, server: true,
			args: []string{"serve", "--policy", memory}, code: command.ExitUsage,
			message: `SANDBOX_WEBHOOK_LEAK_MITIGATION="sideways": invalid argument "sideways" for "--leak-mitigation" flag: must be on, off or policy`},
		{name: "check bad flag value", args: []string{"check", "-f", pod, "--leak-mitigation", "sideways"}, code: command.ExitUsage,
			message: `invalid argument "sideways" for "--leak-mitigation" flag: must be on, off or policy`, absent: "kubeconfig"},
		{name: "serve bad environment log level", env: map[string]string{"SANDBOX_WEBHOOK_LOG_LEVEL": "loud"}, server: true,
			args: []string{"serve", "--policy", memory}, code: command.ExitUsage,
			message: `--log-level (from $SANDBOX_WEBHOOK_LOG_LEVEL): "loud": must be info or debug`},
		{name: "serve bad flag value", args: []string{"serve", "--policy", memory, "--tls-min-version", "1.1"}, code: command.ExitUsage,
			message: `--tls-min-version "1.1": must be 1.2 or 1.3`, server: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			main := commandtest.Main(Main)
			if c.server {
				main = webhookcmd.Main
			}
			_, stderr, code := commandtest.RunCLI(t, main, "", c.args...)
			if code != c.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			if !strings.Contains(stderr, c.message) {
				t.Errorf("stderr does not say %q:\n%s", c.message, stderr)
			}
			if c.absent != "" && strings.Contains(stderr, c.absent) {
				t.Errorf("stderr mentions %q:\n%s", c.absent, stderr)
			}
		})
	}
}

// TestValidateReportsEveryPath: validate checks every path and reports all
// their problems at once, empty ones included.
func TestValidateReportsEveryPath(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := testkit.Path("policy/testdata/invalid-hostpath-dangerous.yaml")
	misspelled := testkit.Path("policy/testdata/invalid-misspelled-field.yaml")
	stdout, stderr, code := commandtest.RunCLI(t, Main, "", "validate", bad, testkit.Path("examples/policies/memory"), empty, misspelled, testkit.Path("examples/policies"))
	if code != command.ExitError {
		t.Errorf("exit code %d, want %d", code, command.ExitError)
	}
	for _, want := range []string{
		bad + " (",
		empty + ": holds no policy document",
		misspelled + ` (misspelled): spec.enforcment: Forbidden: unknown field; did you mean "enforcement"?`,
		testkit.Path("examples/policies") + ": holds no *.yaml, *.yml or *.json file",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "sandbox-seed") || !strings.Contains(stdout, "is valid") {
		t.Errorf("the valid path between the bad ones is not reported:\n%s", stdout)
	}
}

// TestEmptyPolicySetRefused: a directory of directories is not zero
// policies but an error, for every command that loads policies.
func TestEmptyPolicySetRefused(t *testing.T) {
	dir := testkit.Path("examples/policies")
	pod := testkit.Path("testdata/pods/basic.yaml")
	for _, args := range [][]string{
		{"dry-run", "--policy", dir, "-f", pod},
		{"export-map", "--policy", dir},
	} {
		t.Run(args[0], func(t *testing.T) {
			stdout, stderr, code := commandtest.RunCLI(t, Main, "", args...)
			if code != command.ExitError || !strings.Contains(stderr, dir+": holds no *.yaml, *.yml or *.json file") {
				t.Errorf("exit code %d, stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
			}
		})
	}
}

// TestCertsGenerateRefusesToOverwrite: the CA key is not kept, so an
// existing CA is only replaced with --force (the server binary's certs
// generate).
func TestCertsGenerateRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	args := []string{"certs", "generate", "--out-dir", dir, "--host", "127.0.0.1"}
	if _, stderr, code := commandtest.RunCLI(t, webhookcmd.Main, "", args...); code != command.ExitOK {
		t.Fatalf("first generate: exit code %d: %s", code, stderr)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := commandtest.RunCLI(t, webhookcmd.Main, "", args...)
	if code != command.ExitError || !strings.Contains(stderr, "ca.crt, tls.crt, tls.key in "+dir+": already exists") || !strings.Contains(stderr, "--force") {
		t.Errorf("second generate: exit code %d, stderr:\n%s", code, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); string(again) != string(ca) {
		t.Error("the refused generate replaced ca.crt")
	}
	if _, stderr, code := commandtest.RunCLI(t, webhookcmd.Main, "", append(args, "--force")...); code != command.ExitOK {
		t.Errorf("generate --force: exit code %d: %s", code, stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); string(again) == string(ca) {
		t.Error("generate --force kept the old ca.crt")
	}
}
