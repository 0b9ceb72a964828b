package testcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
)

// TestExamples runs the examples' policy tests, as a policy repository's CI
// would: make test keeps them passing.
func TestExamples(t *testing.T) {
	t.Chdir(golden.Root())
	stdout, stderr, code := runCLI(t, "", "test", "examples/tests")
	if code != command.ExitOK || stderr != "" {
		t.Fatalf("exit code %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.HasSuffix(stdout, "7 passed, 0 failed\n") {
		t.Errorf("not every example case ran:\n%s", stdout)
	}
}

// TestTestCommand compares the whole output of failing and invalid test
// files with their goldens: the diffs a policy author reads, and the exit
// code.
func TestTestCommand(t *testing.T) {
	t.Chdir(golden.Root())
	for _, name := range []string{"failing", "invalid"} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, "", "test", "testdata/test/"+name)
			golden.Compare(t, "testdata/test/"+name+".golden", fmt.Appendf(nil, "%s--- stderr\n%sexit code: %d\n", stdout, stderr, code))
		})
	}
	if _, stderr, code := runCLI(t, "", "test"); code != command.ExitUsage {
		t.Errorf("test without a path: exit code %d, want %d:\n%s", code, command.ExitUsage, stderr)
	}
	if _, stderr, code := runCLI(t, "", "test", "policy"); code != command.ExitError || !strings.Contains(stderr, "policy: no sandbox-webhook-test.yaml file in it") {
		t.Errorf("a directory without tests: exit code %d:\n%s", code, stderr)
	}
}

// TestHostileTestFile: a test file's names reach the terminal escaped (a
// "\r" must not let a case print PASS over its FAIL line, nor ESC drive the
// terminal), and its absolute paths are used as given, not joined under its
// folder.
func TestHostileTestFile(t *testing.T) {
	dir := t.TempDir()
	file := fmt.Sprintf(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicyTest
metadata:
  name: "evil\u001b[2J"
policies: [%q]
cases:
  - name: "fails\rPASS evil: fails"
    input: %q
    unchanged: true
`, golden.Path("examples/policies/memory"), golden.Path("examples/pods/sandbox.yaml"))
	if err := os.WriteFile(filepath.Join(dir, "sandbox-webhook-test.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "", "test", dir)
	if code != command.ExitError {
		t.Fatalf("exit code %d, want %d:\n%s%s", code, command.ExitError, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, `FAIL evil\x1b[2J: fails\x0dPASS evil: fails`+"\n") {
		t.Errorf("the FAIL line is not escaped:\n%q", stdout)
	}
	if strings.ContainsAny(stdout+stderr, "\x1b\r") {
		t.Errorf("a control character reached the output:\n%q\n%q", stdout, stderr)
	}
}
