// Package testcmd is the test command: declarative policy tests
// (sandbox-webhook-test.yaml files) run offline through the webhook's
// mutation, for a policy repository's CI.
package testcmd

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestFileName is the name of the declarative test files `test` looks for.
const TestFileName = "sandbox-webhook-test.yaml"

// policyTest is one test file: the policies, the namespaces the inputs live
// in, and the cases. Paths are relative to the test file.
type policyTest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	// Policies are policy files or directories, loaded as the server does.
	Policies []string `json:"policies"`
	// Namespaces is a file of Namespace objects whose labels the policies
	// see; a namespace not in it has only its kubernetes.io/metadata.name.
	Namespaces string `json:"namespaces,omitempty"`
	// LeakMitigation is on, off or policy (default), as --leak-mitigation.
	LeakMitigation mutate.LeakMitigation `json:"leakMitigation,omitempty"`
	Cases          []testCase            `json:"cases"`
}

type testCase struct {
	Name string `json:"name"`
	// Input is a file holding one pod or one workload with a pod template.
	Input string `json:"input"`
	// Namespace is the input's namespace when it names none (default
	// "default").
	Namespace string `json:"namespace,omitempty"`
	// Object is a file holding the expected object after mutation.
	Object string `json:"object,omitempty"`
	// Patch is a file holding the expected JSONPatch (an empty array when
	// nothing changes).
	Patch string `json:"patch,omitempty"`
	// Unchanged expects the input to come back as it is.
	Unchanged bool `json:"unchanged,omitempty"`
	// Matched lists, when set, exactly the policies expected to select
	// the pod, in order.
	Matched *[]string `json:"matched,omitempty"`
	// Warnings lists, when set, exactly the warnings kubectl would print.
	Warnings *[]string `json:"warnings,omitempty"`
}

// NewCommand returns the test command.
func NewCommand(streams command.IOStreams) *cobra.Command {
	var allowOutsideRoot bool
	cmd := &cobra.Command{
		Use:   "test PATH...",
		Short: "Run declarative policy tests offline, as a policy repository's CI does",
		Long: `Run the test cases of every ` + TestFileName + ` file under each PATH (a
file, or a directory searched recursively) through the same mutation core and
JSONPatch computation as the webhook, and compare the result with what each
case expects: the whole mutated object, the patch, that nothing changes, the
policies that match, the warnings. A mismatch prints a unified diff.

A test file:

  apiVersion: sandbox-webhook.io/v1alpha1
  kind: SandboxPolicyTest
  metadata: {name: seed}
  policies: [../policies/memory]   # files or directories, relative to this file or absolute (inside the root, below)
  namespaces: namespaces.yaml      # optional: Namespace objects (their labels)
  leakMitigation: policy           # optional: on, off or policy
  cases:
    - name: a sandbox pod gets its cache
      input: pods/sandbox.yaml     # one Pod, or a workload with a pod template
      object: expected/sandbox.yaml
      matched: [sandbox-seed]
      warnings: []
    - name: the router is left alone
      input: pods/router.yaml
      unchanged: true

Every path a test file names (policies and the files of a policy directory,
namespaces, inputs, objects, patches), and the test file itself, must resolve
inside the test file's repository root, symlinks followed: the nearest
directory above it holding .git (a directory, or the file of a worktree or
submodule), else the test file's own directory. A symlink must be relative
and stay inside. A path outside is named and not read: test runs in CI on pull
requests to a policy repository, and would otherwise print any file the runner
can read (a kubeconfig, a token) in a diff. --allow-outside-root lifts this,
for test files you trust that name policies kept beside the repository. Every
file is read only when it is a regular file (not a device or a FIFO) of at
most 8 MiB.

Exit codes: 0 every case passed; 1 a case failed, or a test file, policy or
input is invalid, or a path is outside the root; 2 bad arguments.`,
		Example: "  kubectl-sandbox_webhook test examples/tests",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return command.UsageErrorf("test needs at least one test file or directory")
			}
			return runTests(streams.Out, args, allowOutsideRoot)
		},
	}
	cmd.Flags().BoolVar(&allowOutsideRoot, "allow-outside-root", false,
		"read the paths a test file names even where they resolve outside its repository root (the nearest directory above it holding .git)")
	return cmd
}

// runTests runs every test file under paths and returns an error when a case
// fails.
func runTests(out io.Writer, paths []string, allowOutsideRoot bool) error {
	w := textout.NewTextWriter(out) // names, case names and diffs come from the files
	var files []string
	for _, p := range paths {
		found, err := testFiles(p)
		if err != nil {
			return err
		}
		files = append(files, found...)
	}
	passed, failed := 0, 0
	for _, f := range files {
		p, fl, err := runTestFile(w, f, allowOutsideRoot)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		passed, failed = passed+p, failed+fl
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d test cases failed", failed, passed+failed)
	}
	return nil
}

// testFiles lists the test files a PATH stands for, in lexical order.
func testFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == TestFileName {
			files = append(files, p)
		}
		return err
	})
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s: no %s file in it", path, TestFileName)
	}
	return files, err
}

// loadTest reads a test file strictly and checks what the cases need.
func loadTest(path string) (*policyTest, error) {
	raw, err := yamldoc.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, err
	}
	t := &policyTest{}
	strict, err := sigsjson.UnmarshalStrict(js, t)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, e := range strict {
		problems = append(problems, e.Error())
	}
	if t.APIVersion != policy.APIVersion || t.Kind != policy.TestKind {
		problems = append(problems, fmt.Sprintf("apiVersion and kind must be %s and %s", policy.APIVersion, policy.TestKind))
	}
	if len(t.Policies) == 0 {
		problems = append(problems, "policies: list at least one policy file or directory")
	}
	if _, ok := mutate.ParseLeakMitigation(string(t.LeakMitigation)); !ok {
		problems = append(problems, fmt.Sprintf("leakMitigation: must be on, off or policy, not %q", t.LeakMitigation))
	}
	if len(t.Cases) == 0 {
		problems = append(problems, "cases: list at least one case")
	}
	for i, c := range t.Cases {
		switch {
		case c.Name == "":
			problems = append(problems, fmt.Sprintf("cases[%d].name: required", i))
		case c.Input == "":
			problems = append(problems, fmt.Sprintf("cases[%d] (%s).input: required", i, c.Name))
		case !slices.Contains([]bool{c.Object != "", c.Patch != "", c.Unchanged, c.Matched != nil, c.Warnings != nil}, true):
			problems = append(problems, fmt.Sprintf("cases[%d] (%s): expects nothing: set object, patch, unchanged, matched and/or warnings", i, c.Name))
		case c.Unchanged && (c.Object != "" || c.Patch != ""):
			problems = append(problems, fmt.Sprintf("cases[%d] (%s): unchanged excludes object and patch", i, c.Name))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("invalid test file:\n  " + strings.Join(problems, "\n  "))
	}
	return t, nil
}

// runTestFile runs the cases of one test file and prints a line per case,
// with the differences of a failing one.
func runTestFile(w io.Writer, path string, allowOutsideRoot bool) (passed, failed int, err error) {
	var root *repoRoot
	if !allowOutsideRoot {
		if root, err = openRepoRoot(path); err != nil {
			return 0, 0, err
		}
		defer root.Close()
		if !root.inside(path) {
			return 0, 0, fmt.Errorf("resolves outside the root %s (%s) and is not read; --allow-outside-root reads it", root.dir, root.why)
		}
	}
	t, err := loadTest(path)
	if err != nil {
		return 0, 0, err
	}
	dir := filepath.Dir(path)
	rel := func(p string) string { // relative to the file; an absolute path as given
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if root != nil {
		if err := root.check(t, rel); err != nil {
			return 0, 0, err
		}
	}
	policies := make([]string, len(t.Policies))
	for i, p := range t.Policies {
		policies[i] = rel(p)
	}
	set, err := policy.Load(policies...)
	if err != nil {
		return 0, 0, err
	}
	var namespaces map[string]map[string]string
	if t.Namespaces != "" {
		if namespaces, err = input.LoadNamespaces(rel(t.Namespaces)); err != nil {
			return 0, 0, err
		}
	}
	opts := mutate.Options{LeakMitigation: t.LeakMitigation} // validated; "" is policy
	name := cmp.Or(t.Metadata.Name, path)
	for _, c := range t.Cases {
		diffs, err := runCase(c, rel, namespaces, set, opts)
		if err != nil {
			return passed, failed, fmt.Errorf("case %q: %w", c.Name, err)
		}
		if len(diffs) == 0 {
			passed++
			fmt.Fprintf(w, "PASS %s: %s\n", name, c.Name)
			continue
		}
		failed++
		fmt.Fprintf(w, "FAIL %s: %s\n", name, c.Name)
		for _, d := range diffs {
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(strings.TrimRight(d, "\n"), "\n", "\n  "))
		}
	}
	return passed, failed, nil
}

// runCase runs one case and returns what differs from its expectations.
func runCase(c testCase, rel func(string) string, namespaces map[string]map[string]string, set *policy.Set, opts mutate.Options) ([]string, error) {
	obj, err := input.ReadOneObject(rel(c.Input))
	if err != nil {
		return nil, err
	}
	if !obj.HasPod() {
		return nil, fmt.Errorf("%s: neither a Pod nor a workload with a pod template", c.Input)
	}
	nsName := cmp.Or(obj.Namespace, c.Namespace, "default")
	labels := map[string]string{"kubernetes.io/metadata.name": nsName}
	maps.Copy(labels, namespaces[nsName])
	p, err := preview.Object(obj, mutate.Namespace{Name: nsName, Labels: labels}, set, opts)
	if err != nil {
		return nil, err
	}

	var diffs []string
	if c.Unchanged && p.Changed {
		patch, err := textout.YAML(p.Patch)
		if err != nil {
			patch = p.Patch
		}
		diffs = append(diffs, "expected unchanged, but the webhook would patch it:\n"+string(patch))
	}
	if c.Object != "" {
		if d, err := yamlDiff(rel(c.Object), c.Object, p.Object); err != nil {
			return nil, err
		} else if d != "" {
			diffs = append(diffs, "object differs (-expected +got):\n"+d)
		}
	}
	if c.Patch != "" {
		if d, err := yamlDiff(rel(c.Patch), c.Patch, preview.NonNullPatch(p.Patch)); err != nil {
			return nil, err
		} else if d != "" {
			diffs = append(diffs, "patch differs (-expected +got):\n"+d)
		}
	}
	if c.Matched != nil {
		var got []string
		for _, pr := range p.Result.Policies {
			if pr.Matched {
				got = append(got, pr.Policy)
			}
		}
		if d := listDiff("matched policies", *c.Matched, got); d != "" {
			why := ""
			for _, pr := range p.Result.Policies {
				if !pr.Matched && slices.Contains(*c.Matched, pr.Policy) {
					why += fmt.Sprintf("\n%s: not matched: %s", pr.Policy, pr.Reason)
				}
			}
			if p.Result.PodSkipped != "" {
				why += "\npod skipped: " + p.Result.PodSkipped
			}
			diffs = append(diffs, d+why)
		}
	}
	if c.Warnings != nil {
		if d := listDiff("warnings", *c.Warnings, p.Result.Warnings); d != "" {
			diffs = append(diffs, d)
		}
	}
	return diffs, nil
}

// yamlDiff compares the YAML or JSON document in wantFile (named wantName
// in messages) with got, JSON, by content and returns a unified diff of both
// as YAML, keys sorted, or "" when they are equal.
func yamlDiff(wantFile, wantName string, got []byte) (string, error) {
	raw, err := yamldoc.ReadFile(wantFile)
	if err != nil {
		return "", err
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", wantName, err)
	}
	w, err := textout.YAML(js)
	if err != nil {
		return "", fmt.Errorf("%s: %w", wantName, err)
	}
	g, err := textout.YAML(got)
	if err != nil || bytes.Equal(w, g) {
		return "", err
	}
	return preview.Diff(string(w), string(g), wantName, "got")
}

// listDiff compares two lists of strings, order included.
func listDiff(what string, want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s differ:", what)
	for _, s := range want {
		if !slices.Contains(got, s) {
			fmt.Fprintf(&b, "\n- %s", s)
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			fmt.Fprintf(&b, "\n+ %s", s)
		}
	}
	if b.Len() == len(what)+len(" differ:") {
		fmt.Fprintf(&b, "\nexpected order %q, got %q", want, got)
	}
	return b.String()
}
