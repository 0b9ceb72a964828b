package plugincmd

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestSpecialFilesRefused: every file the command line reads is a regular
// file. A device, a FIFO or a socket is refused by name before anything is
// read from it: /dev/zero as a policy was read until memory ran out, and a
// FIFO without a writer blocked for ever. Stdin stays -f - (TestDryRunStdin).
func TestSpecialFilesRefused(t *testing.T) {
	memory := testkit.Path("examples/policies/memory")
	pod := testkit.Path("examples/pods/sandbox.yaml")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fifoErr := "read " + fifo + ": is a named pipe (FIFO), not a regular file"
	zeroErr := "/dev/zero: cannot read: is a character device, not a regular file"

	// A test file whose cases each name the FIFO in one field; a policy
	// test runs in a repository, so the FIFO is inside it.
	testFile := func(name, policies, namespaces, field string) string {
		t.Helper()
		repo := filepath.Join(dir, name)
		for _, d := range []string{".git", "policies"} {
			if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for src, dst := range map[string]string{testkit.SeedFile: "policies/sandbox-seed.yaml", "examples/pods/sandbox.yaml": "pod.yaml"} {
			if err := os.WriteFile(filepath.Join(repo, dst), testkit.Read(t, src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Mkfifo(filepath.Join(repo, "fifo.yaml"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := "input: pod.yaml\n    matched: [sandbox-seed]"
		if field != "" {
			c = "input: pod.yaml\n    " + field + ": fifo.yaml"
			if field == "input" {
				c = "input: fifo.yaml\n    unchanged: true"
			}
		}
		ns := ""
		if namespaces != "" {
			ns = "namespaces: " + namespaces + "\n"
		}
		file := filepath.Join(repo, "sandbox-webhook-test.yaml")
		content := fmt.Sprintf("apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\npolicies: [%s]\n%scases:\n  - name: c\n    %s\n", policies, ns, c)
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	fifoTest := filepath.Join(dir, "fifo-test", "sandbox-webhook-test.yaml")
	if err := os.MkdirAll(filepath.Dir(fifoTest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifoTest, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"validate a device", []string{"validate", "/dev/zero"}, zeroErr},
		{"validate a FIFO", []string{"validate", fifo}, fifo + ": cannot read: is a named pipe (FIFO), not a regular file"},
		{"dry-run --policy a device", []string{"dry-run", "--policy", "/dev/zero", "-f", pod}, zeroErr},
		{"dry-run -f a device", []string{"dry-run", "--policy", memory, "-f", "/dev/zero"}, "read /dev/zero: is a character device, not a regular file"},
		{"dry-run -f a FIFO", []string{"dry-run", "--policy", memory, "-f", fifo}, fifoErr},
		{"dry-run --namespaces a FIFO", []string{"dry-run", "--policy", memory, "--namespaces", fifo, "-f", pod}, fifoErr},
		{"export-map --policy a device", []string{"export-map", "--policy", "/dev/zero"}, zeroErr},
		{"check -f a FIFO", []string{"check", "-f", fifo}, fifoErr},
		{"test: the test file a FIFO", []string{"test", fifoTest}, fifoTest + ": read " + fifoTest + ": is a named pipe (FIFO), not a regular file"},
		{"test: policies", []string{"test", testFile("policies", "fifo.yaml", "", "object")}, filepath.Join(dir, "policies/sandbox-webhook-test.yaml") + ": " +
			filepath.Join(dir, "policies/fifo.yaml") + ": cannot read: is a named pipe (FIFO), not a regular file"},
		{"test: namespaces", []string{"test", testFile("namespaces", "policies", "fifo.yaml", "")}, filepath.Join(dir, "namespaces/sandbox-webhook-test.yaml") + ": " +
			"read " + filepath.Join(dir, "namespaces/fifo.yaml") + ": is a named pipe (FIFO), not a regular file"},
		{"test: input", []string{"test", testFile("input", "policies", "", "input")}, filepath.Join(dir, "input/sandbox-webhook-test.yaml") + `: case "c": ` +
			"read " + filepath.Join(dir, "input/fifo.yaml") + ": is a named pipe (FIFO), not a regular file"},
		{"test: object", []string{"test", testFile("object", "policies", "", "object")}, filepath.Join(dir, "object/sandbox-webhook-test.yaml") + `: case "c": ` +
			"read " + filepath.Join(dir, "object/fifo.yaml") + ": is a named pipe (FIFO), not a regular file"},
		{"test: patch", []string{"test", testFile("patch", "policies", "", "patch")}, filepath.Join(dir, "patch/sandbox-webhook-test.yaml") + `: case "c": ` +
			"read " + filepath.Join(dir, "patch/fifo.yaml") + ": is a named pipe (FIFO), not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := commandtest.RunCLI(t, Main, "", c.args...)
			if code != command.ExitError || stdout != "" || stderr != "Error: "+c.stderr+"\n" {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant stderr:\nError: %s", code, command.ExitError, stdout, stderr, c.stderr)
			}
		})
	}
}
