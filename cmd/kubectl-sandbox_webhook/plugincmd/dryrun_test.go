package plugincmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/internal/version"
)

// TestDryRunOutputs runs dry-run over workloads, Lists and pass-through
// objects in every output format and compares the whole output.
func TestDryRunOutputs(t *testing.T) {
	for _, format := range []string{"yaml", "json", "patch", "diff"} {
		t.Run(format, func(t *testing.T) {
			stdout, stderr, code := commandtest.RunCLI(t, Main, "", "dry-run",
				"--policy", testkit.Path("examples/policies/memory"),
				"-f", testkit.Path("testdata/cli/workloads.yaml"), "-o", format)
			golden.Compare(t, "testdata/cli/workloads."+format+".golden",
				[]byte(fmt.Sprintf("%s--- stderr\n%sexit code: %d\n", stdout, stderr, code)))
		})
	}
}

func TestDryRunStdin(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {app: sandbox}\nspec:\n  containers: [{name: c, image: i}]\n"
	stdout, stderr, code := commandtest.RunCLI(t, Main, pod, "dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", "-", "-n", "sandboxes", "-o", "patch")
	if code != command.ExitOK {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{`"path": "/spec/volumes"`, `"path": "/spec/resources"`, `"medium": "Memory"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("patch lacks %s:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "Pod sandboxes/p:\n  sandbox-seed: matched") {
		t.Errorf("report does not name the pod and the matching policy:\n%s", stderr)
	}
}

// TestExitCodes checks the documented exit codes and that each error says
// what is wrong.
func TestExitCodes(t *testing.T) {
	memory := testkit.Path("examples/policies/memory")
	pod := testkit.Path("testdata/pods/basic.yaml")
	bad := testkit.Path("policy/testdata/invalid-hostpath-dangerous.yaml")
	cases := []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"ok", []string{"dry-run", "-p", memory, "-f", pod}, command.ExitOK, ""},
		{"invalid policy", []string{"dry-run", "-p", bad, "-f", pod}, command.ExitError, "invalid-hostpath-dangerous.yaml"},
		{"missing input file", []string{"dry-run", "-p", memory, "-f", "/nonexistent.yaml"}, command.ExitError, "/nonexistent.yaml"},
		{"no policy", []string{"dry-run", "-f", pod}, command.ExitUsage, "--policy is required"},
		{"no input", []string{"dry-run", "-p", memory}, command.ExitUsage, "-f is required"},
		{"bad output", []string{"dry-run", "-p", memory, "-f", pod, "-o", "xml"}, command.ExitUsage, `--output must be yaml, json, patch, diff or summary, not "xml"`},
		{"bad mode", []string{"dry-run", "-p", memory, "-f", pod, "--leak-mitigation", "maybe"}, command.ExitUsage, `invalid argument "maybe" for "--leak-mitigation" flag: must be on, off or policy`},
		{"unknown flag", []string{"dry-run", "--polcy", memory}, command.ExitUsage, "unknown flag: --polcy"},
		{"namespace conflict", []string{"dry-run", "-p", memory, "-f", pod, "-n", "other"}, command.ExitUsage, `is in namespace "sandboxes", not --namespace "other"`},
		{"bad namespace label", []string{"dry-run", "-p", memory, "-f", pod, "--namespace-label", "novalue"}, command.ExitUsage, `want key=value`},
		{"validate ok", []string{"validate", memory}, command.ExitOK, ""},
		{"validate invalid", []string{"validate", bad}, command.ExitError, "must not be or lie under"},
		{"validate nothing", []string{"validate"}, command.ExitUsage, "at least one policy"},
		// --allowed-host-path is serve's: the examples' asset lies in /mnt/shared.
		{"validate allowed host path", []string{"validate", "--allowed-host-path", "/mnt/shared", memory}, command.ExitOK, ""},
		{"validate host path not allowed", []string{"validate", "--allowed-host-path", "/srv/data", "--allowed-host-path", "/mnt/other", memory},
			command.ExitError, `spec.assets[0].hostPath.path: Invalid value: "/mnt/shared/swe-rebench-v2": must lie under an --allowed-host-path: /srv/data, /mnt/other`},
		{"validate bad allowed host path", []string{"validate", "--allowed-host-path", "/", memory}, command.ExitUsage, `--allowed-host-path "/": must not be /`},
		{"dry-run allowed host path", []string{"dry-run", "-p", memory, "-f", pod, "--allowed-host-path", "/mnt/shared"}, command.ExitOK, ""},
		{"dry-run host path not allowed", []string{"dry-run", "-p", memory, "-f", pod, "--allowed-host-path", "/srv/data"},
			command.ExitError, `must lie under an --allowed-host-path: /srv/data`},
		{"dry-run relative allowed host path", []string{"dry-run", "-p", memory, "-f", pod, "--allowed-host-path", "mnt/shared"}, command.ExitUsage, `--allowed-host-path "mnt/shared"`},
		{"version", []string{"version"}, command.ExitOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := commandtest.RunCLI(t, Main, "", c.args...)
			if code != c.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			if c.message != "" && !strings.Contains(stderr, c.message) {
				t.Errorf("stderr does not say %q:\n%s", c.message, stderr)
			}
		})
	}
}

func TestValidateOutput(t *testing.T) {
	stdout, _, code := commandtest.RunCLI(t, Main, "", "validate", testkit.Path("examples/policies/memory"), testkit.Path("examples/policies/disk"))
	if code != command.ExitOK {
		t.Fatalf("exit code %d", code)
	}
	if got := strings.Count(stdout, "is valid\n"); got != 2 {
		t.Errorf("want one line per policy, got:\n%s", stdout)
	}
}

// TestDryRunSummary: -o summary counts the corpus under several policies
// with leak mitigation on, instead of a report per pod.
func TestDryRunSummary(t *testing.T) {
	stdout, stderr, code := commandtest.RunCLI(t, Main, "", "dry-run", "-p", testkit.Path("testdata/policies/multi"), "-p", testkit.Path("examples/policies/memory"),
		"-f", testkit.Path("testdata/pods"), "-f", testkit.Path("testdata/cli/workloads.yaml"),
		"--namespaces", testkit.Path(golden.Namespaces), "--leak-mitigation=on", "--predict", "-o", "summary")
	golden.Compare(t, "testdata/cli/summary.golden", []byte(fmt.Sprintf("%s--- stderr\n%sexit code: %d\n", stdout, stderr, code)))
}

// TestVersion: version prints the stamped version alone.
func TestVersion(t *testing.T) {
	stdout, stderr, code := commandtest.RunCLI(t, Main, "", "version")
	if code != command.ExitOK || stdout != version.Version+"\n" {
		t.Errorf("version printed %q (exit code %d, stderr %q), want %q", stdout, code, stderr, version.Version+"\n")
	}
}

// TestDryRunSummaryNoMemoryRequest: -o summary counts the pods that end
// with a pod-level memory request of 0 under the headroom (the example
// pods without container requests, under the seed policy, which sets no
// memory.request), and says what to do.
func TestDryRunSummaryNoMemoryRequest(t *testing.T) {
	stdout, stderr, code := commandtest.RunCLI(t, Main, "", "dry-run", "-p", testkit.Path("examples/policies/memory"),
		"-f", testkit.Path("examples/pods"), "-n", "sandboxes", "-o", "summary")
	golden.Compare(t, "testdata/cli/summary-memory-request.golden", []byte(fmt.Sprintf("%s--- stderr\n%sexit code: %d\n", stdout, stderr, code)))
}

// TestValidateValues: validate --values checks a values file's inline
// policies as the server loads them: the chart's default is valid, and a
// quantity the chart's schema lets through is refused with its file, entry
// and field path.
func TestValidateValues(t *testing.T) {
	stdout, stderr, code := commandtest.RunCLI(t, Main, "", "validate", "--values", testkit.Path("charts/sandbox-webhook/values.yaml"))
	if code != command.ExitOK || !strings.Contains(stdout, "values.yaml: policies.inline[sandbox-seed.yaml]: policy sandbox-seed") {
		t.Errorf("the chart's values: exit %d\n%s%s", code, stdout, stderr)
	}
	_, stderr, code = commandtest.RunCLI(t, Main, "", "validate", "--values", testkit.Path("testdata/cli/values-bad-policy.yaml"))
	if want := `values-bad-policy.yaml: policies.inline[mine.yaml] (mine): spec.memory.limit: Invalid value: "8 Gi": must be a quantity such as 1Gi`; code == command.ExitOK || !strings.Contains(stderr, want) {
		t.Errorf("a bad inline policy: exit %d\n%s\nwant it to say %s", code, stderr, want)
	}
}
