package testcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// cli is the command line with test its one subcommand.
var cli = commandtest.Subcommand(NewCommand)

// TestExamples runs the examples' policy tests, as a policy repository's CI
// would: make test keeps them passing.
func TestExamples(t *testing.T) {
	t.Chdir(testkit.Root())
	stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", "examples/tests")
	if code != command.ExitOK || stderr != "" {
		t.Fatalf("exit code %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.HasSuffix(stdout, "9 passed, 0 failed\n") {
		t.Errorf("not every example case ran:\n%s", stdout)
	}
}

// TestTestCommand compares the whole output of failing and invalid test
// files with their goldens: the diffs a policy author reads, and the exit
// code.
func TestTestCommand(t *testing.T) {
	t.Chdir(testkit.Root())
	for _, name := range []string{"failing", "invalid"} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", "testdata/test/"+name)
			golden.Compare(t, "testdata/test/"+name+".golden", fmt.Appendf(nil, "%s--- stderr\n%sexit code: %d\n", stdout, stderr, code))
		})
	}
	if _, stderr, code := commandtest.RunCLI(t, cli, "", "test"); code != command.ExitUsage {
		t.Errorf("test without a path: exit code %d, want %d:\n%s", code, command.ExitUsage, stderr)
	}
	if _, stderr, code := commandtest.RunCLI(t, cli, "", "test", "policy"); code != command.ExitError || !strings.Contains(stderr, "policy: no sandbox-webhook-test.yaml file in it") {
		t.Errorf("a directory without tests: exit code %d:\n%s", code, stderr)
	}
}

// TestHostileTestFile: a test file's names reach the terminal escaped (a
// "\r" must not let a case print PASS over its FAIL line, nor ESC drive the
// terminal), and its absolute paths are used as given, not joined under its
// folder (they are outside its root: --allow-outside-root reads them).
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
`, testkit.Path("examples/policies/memory"), testkit.Path("examples/pods/sandbox.yaml"))
	if err := os.WriteFile(filepath.Join(dir, "sandbox-webhook-test.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", "--allow-outside-root", dir)
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

// writeTree writes files (path → content; content "-> target" makes a
// symlink, "dir/" a directory) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(content, "-> "):
			err = os.Symlink(strings.TrimPrefix(content, "-> "), p)
		case content == "dir/":
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// secrets are planted beside a checkout, as on a CI runner: a kubeconfig, a
// Docker config.json and a service-account token.
var secrets = map[string]string{
	"outside/kubeconfig":  "apiVersion: v1\nkind: Config\nusers:\n  - name: ci\n    user: {token: s3cr3t-kubeconfig}\n",
	"outside/config.json": `{"auths": {"registry.example": {"auth": "s3cr3t-docker"}}}`,
	"outside/token":       "s3cr3t-token\n",
}

// TestPathsConfinedToRoot: every path a test file names (policies and the
// files of a policy directory, namespaces, inputs, objects, patches), and
// the test file itself, must resolve inside its repository root, symlinks
// followed. A pull request to a policy repository could otherwise have test
// print any file the CI runner can read in its "object differs" diff.
// Refused paths are named, with their case and field, and never read.
func TestPathsConfinedToRoot(t *testing.T) {
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	pod, seed := string(testkit.Read(t, "examples/pods/sandbox.yaml")), string(testkit.Seed(t))
	files := map[string]string{
		"outside/pods/sandbox.yaml":         pod,
		"repo/.git":                         "dir/",
		"repo/policies/sandbox-seed.yaml":   seed,
		"repo/policies-leaky/seed.yaml":     seed,
		"repo/policies-leaky/zz-leak.yaml":  "-> ../../outside/kubeconfig",
		"repo/pods/sandbox.yaml":            pod,
		"repo/tests/leak/expected.yaml":     "-> ../../../outside/kubeconfig",
		"repo/tests/leak/outside-pods":      "-> ../../../outside/pods",
		"repo/tests/linked/" + TestFileName: "-> ../../../outside/" + TestFileName,
		"outside/" + TestFileName:           "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\npolicies: [token]\ncases: [{name: c, input: token, unchanged: true}]\n",
		"repo/tests/dir/" + TestFileName:    "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\npolicies: [../../policies-leaky]\ncases: [{name: c, input: ../../pods/sandbox.yaml, unchanged: true}]\n",
		"repo/tests/leak/" + TestFileName: fmt.Sprintf(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicyTest
metadata: {name: leak}
policies: [../../policies]
namespaces: ../../../outside/kubeconfig
cases:
  - {name: relative, input: ../../pods/sandbox.yaml, object: ../../../outside/kubeconfig}
  - {name: absolute, input: ../../pods/sandbox.yaml, patch: %s}
  - {name: symlink, input: ../../pods/sandbox.yaml, object: expected.yaml}
  - {name: symlinked directory, input: outside-pods/sandbox.yaml, unchanged: true}
  - {name: inside, input: %s, matched: [sandbox-seed]}
`, filepath.Join(tmp, "outside/config.json"), filepath.Join(repo, "pods/sandbox.yaml")),
	}
	for k, v := range secrets {
		files[k] = v
	}
	writeTree(t, tmp, files)
	why := "the nearest directory above the test file holding .git"
	for _, c := range []struct{ name, want string }{
		{"leak", "paths that resolve outside the root " + repo + " (" + why + ") are not read; --allow-outside-root reads them:\n" +
			"  namespaces: ../../../outside/kubeconfig\n" +
			"  cases[0] (relative).object: ../../../outside/kubeconfig\n" +
			"  cases[1] (absolute).patch: " + filepath.Join(tmp, "outside/config.json") + "\n" +
			"  cases[2] (symlink).object: expected.yaml\n" +
			"  cases[3] (symlinked directory).input: outside-pods/sandbox.yaml"},
		{"dir", "paths that resolve outside the root " + repo + " (" + why + ") are not read; --allow-outside-root reads them:\n" +
			"  policies[0]: ../../policies-leaky/zz-leak.yaml"},
		{"linked", "resolves outside the root " + repo + " (" + why + ") and is not read; --allow-outside-root reads it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(repo, "tests", c.name, TestFileName)
			stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", file)
			if want := "Error: " + file + ": " + c.want + "\n"; code != command.ExitError || stdout != "" || stderr != want {
				t.Errorf("exit code %d\nstdout:\n%s\nstderr:\n%s\nwant exit code 1, no stdout and the stderr:\n%s", code, stdout, stderr, want)
			}
		})
	}
}

// TestAllowOutsideRoot: --allow-outside-root reads paths outside the root,
// as a test file naming a policy directory shared beside the repository
// needs; they are still regular files read within 8 MiB.
func TestAllowOutsideRoot(t *testing.T) {
	tmp := t.TempDir()
	writeTree(t, tmp, map[string]string{
		"shared/policies/sandbox-seed.yaml": string(testkit.Seed(t)),
		"repo/.git":                         "dir/",
		"repo/pods/sandbox.yaml":            string(testkit.Read(t, "examples/pods/sandbox.yaml")),
		"repo/" + TestFileName:              "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\nmetadata: {name: shared}\npolicies: [../shared/policies]\ncases: [{name: c, input: pods/sandbox.yaml, matched: [sandbox-seed]}]\n",
		"zero/.git":                         "dir/",
		"zero/pods/sandbox.yaml":            string(testkit.Read(t, "examples/pods/sandbox.yaml")),
		"zero/" + TestFileName:              "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\npolicies: [../shared/policies]\ncases: [{name: c, input: pods/sandbox.yaml, object: /dev/zero}]\n",
	})
	file := filepath.Join(tmp, "repo", TestFileName)
	if stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", file); code != command.ExitError || !strings.HasPrefix(stderr, "Error: "+file+": paths that resolve outside the root") {
		t.Errorf("without the flag: exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", "--allow-outside-root", file)
	if code != command.ExitOK || stdout != "PASS shared: c\n1 passed, 0 failed\n" || stderr != "" {
		t.Errorf("with the flag: exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	zero := filepath.Join(tmp, "zero", TestFileName)
	stdout, stderr, code = commandtest.RunCLI(t, cli, "", "test", "--allow-outside-root", zero)
	if want := "Error: " + zero + `: case "c": read /dev/zero: is a character device, not a regular file` + "\n"; code != command.ExitError || stdout != "" || stderr != want {
		t.Errorf("/dev/zero with the flag: exit code %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
}

// TestRootWithoutGit: the root is the nearest directory holding .git, a
// directory or a file (a worktree, a submodule); without one, the test
// file's own directory.
func TestRootWithoutGit(t *testing.T) {
	tmp := t.TempDir()
	for d := tmp; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			t.Skipf("%s holds .git: the temporary directory is inside a repository", d)
		}
	}
	writeTree(t, tmp, map[string]string{
		"policies/sandbox-seed.yaml": string(testkit.Seed(t)),
		"pods/sandbox.yaml":          string(testkit.Read(t, "examples/pods/sandbox.yaml")),
		"tests/" + TestFileName:      "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\nmetadata: {name: up}\npolicies: [../policies]\ncases: [{name: c, input: ../pods/sandbox.yaml, matched: [sandbox-seed]}]\n",
	})
	file := filepath.Join(tmp, "tests", TestFileName)
	stdout, stderr, code := commandtest.RunCLI(t, cli, "", "test", file)
	want := "Error: " + file + ": paths that resolve outside the root " + filepath.Join(tmp, "tests") +
		" (the test file's directory: no directory above it holds .git) are not read; --allow-outside-root reads them:\n" +
		"  policies[0]: ../policies\n" +
		"  cases[0] (c).input: ../pods/sandbox.yaml\n"
	if code != command.ExitError || stdout != "" || stderr != want {
		t.Errorf("without .git: exit code %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
	// A worktree's .git is a file.
	writeTree(t, tmp, map[string]string{".git": "gitdir: /elsewhere/.git/worktrees/x\n"})
	stdout, stderr, code = commandtest.RunCLI(t, cli, "", "test", file)
	if code != command.ExitOK || stdout != "PASS up: c\n1 passed, 0 failed\n" || stderr != "" {
		t.Errorf("with a .git file: exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
