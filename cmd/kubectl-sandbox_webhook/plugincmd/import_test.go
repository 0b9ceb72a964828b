package plugincmd

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestImportKyverno imports each Kyverno policy of testdata/kyverno (and
// the notes' two policies together) and compares what it writes, what it
// reports and its exit code with the golden files; whatever it writes must
// load as the server loads policies.
func TestImportKyverno(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"notes", []string{"notes-memory.yaml", "notes-disk.yaml"}},
		{"notes-memory", []string{"notes-memory.yaml"}},
		{"kubectl-get", []string{"kubectl-get.json"}},
		{"data-foreach", []string{"data-foreach.yaml"}},
		{"proxy-env", []string{"proxy-env.yaml"}},
		{"frameworks", []string{"frameworks.yaml"}},
		{"env-if-absent", []string{"--allow-partial", "env-if-absent.yaml"}},
		{"default-memory", []string{"--allow-partial", "default-memory.yaml"}},
		{"shm", []string{"shm.yaml"}},
		{"disk", []string{"disk.yaml"}},
		{"foreach-anchor", []string{"foreach-anchor.yaml"}},
		{"foreach-lists", []string{"foreach-lists.yaml"}},
		{"foreach-lists-init", []string{"foreach-lists-init.yaml"}},
		{"foreach-lists-refused", []string{"--allow-partial", "foreach-lists-refused.yaml"}},
		{"workload-template", []string{"workload-template.yaml"}},
		{"autogen", []string{"autogen.yaml"}},
		{"workload-refused", []string{"--allow-partial", "workload-refused.yaml"}},
		{"init-pair", []string{"init-pair.yaml"}},
		{"init-pair-differ", []string{"--allow-partial", "init-pair-differ.yaml"}},
		{"foreach-names", []string{"foreach-names.yaml"}},
		{"anchor-names", []string{"anchor-names.yaml"}},
		{"names-refused", []string{"--allow-partial", "names-refused.yaml"}},
		{"placement", []string{"placement.yaml"}},
		{"path-append", []string{"path-append.yaml"}},
		{"path-refused", []string{"--allow-partial", "path-refused.yaml"}},
		{"runtime-keep", []string{"runtime-keep.yaml"}},
		{"tolerations-json", []string{"--allow-partial", "tolerations-json.yaml"}},
		{"image-mirror", []string{"image-mirror.yaml"}},
		{"replace-image-registry", []string{"--allow-partial", "replace-image-registry.yaml"}},
		{"image-mirror-refused", []string{"--allow-partial", "image-mirror-refused.yaml"}},
		{"unsupported", []string{"--allow-partial", "unsupported.yaml"}},
		{"unsupported-strict", []string{"unsupported.yaml"}},
		{"mutating-policy", []string{"mutating-policy.yaml"}},
		{"split", []string{"--allow-partial", "split.yaml"}},
		{"directory", []string{"--allow-partial", "."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(testkit.Path("testdata/kyverno"))
			stdout, stderr, code := commandtest.RunCLI(t, Main, "", append([]string{"import", "kyverno"}, tc.args...)...)
			golden.Compare(t, "testdata/kyverno/"+tc.name+".golden", []byte(fmt.Sprintf("%s--- stderr\n%sexit code: %d\n", stdout, stderr, code)))
			if stdout == "" {
				return
			}
			if _, err := policy.Parse(tc.name, []byte(stdout)); err != nil {
				t.Errorf("the imported policies do not load: %v", err)
			}
			if code != 0 && code != 5 {
				t.Errorf("wrote policies and exited %d", code)
			}
		})
	}
}

// TestImportKyvernoStdin: - reads standard input; a name that would end a
// comment line is escaped.
func TestImportKyvernoStdin(t *testing.T) {
	raw, err := os.ReadFile(testkit.Path("testdata/kyverno/notes-memory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(string(raw), "rules:\n    - name: uv-cache-tmpfs", "rules:\n    - name: \"tmpfs\\nspec: {assets: [{name: x}]}\"", 1)
	stdout, stderr, code := commandtest.RunCLI(t, Main, in, "import", "kyverno", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `rules: tmpfs\x0aspec: {assets`) || strings.Count(stdout, "\nspec:") != 1 {
		t.Errorf("the rule's name is not escaped in the comment:\n%s", stdout)
	}
}
