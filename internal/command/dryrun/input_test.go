package dryrun

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// sandboxPodYAML is a sandbox pod as dry-run reads it, named by %s: text,
// so that cases can break it in place.
const sandboxPodYAML = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: sandboxes\n  labels: {app: sandbox}\nspec:\n  containers: [{name: c, image: i}]\n"

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// podNames returns the names of the pods a dry-run report talks about.
func podNames(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "Pod ") && strings.HasSuffix(l, ":") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(l, "Pod sandboxes/"), ":"))
		}
	}
	return out
}

// TestInputFiles: -f is repeatable and takes directories (-R for their
// subdirectories) and -, as kubectl does; before, a repeated -f kept only the
// last file and a directory failed.
func TestInputFiles(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, filepath.Join(dir, "a.yaml"), fmt.Sprintf(sandboxPodYAML, "a"))
	b := writeFile(t, filepath.Join(dir, "b.yaml"), fmt.Sprintf(sandboxPodYAML, "b"))
	writeFile(t, filepath.Join(dir, "pods", "c.yml"), fmt.Sprintf(sandboxPodYAML, "c"))
	writeFile(t, filepath.Join(dir, "pods", "deep", "d.json"), `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"d","namespace":"sandboxes","labels":{"app":"sandbox"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
	writeFile(t, filepath.Join(dir, "pods", "notes.txt"), "not read")
	memory := testkit.Path("examples/policies/memory")
	cases := []struct {
		name  string
		args  []string
		stdin string
		want  []string
	}{
		{"repeated", []string{"-f", a, "-f", b}, "", []string{"a", "b"}},
		{"directory", []string{"-f", filepath.Join(dir, "pods")}, "", []string{"c"}},
		{"recursive", []string{"-f", filepath.Join(dir, "pods"), "-R"}, "", []string{"c", "d"}},
		{"stdin and a file", []string{"-f", "-", "-f", b}, fmt.Sprintf(sandboxPodYAML, "s"), []string{"s", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"dry-run", "-p", memory, "-o", "patch"}, c.args...)
			_, stderr, code := commandtest.RunCLI(t, cli, c.stdin, args...)
			if code != command.ExitOK {
				t.Fatalf("exit code %d:\n%s", code, stderr)
			}
			if got := podNames(stderr); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("pods %v, want %v:\n%s", got, c.want, stderr)
			}
		})
	}
}

// TestInputSaysWhatHappened: input that used to pass silently with exit 0
// now says what happened, and empty input fails.
func TestInputSaysWhatHappened(t *testing.T) {
	memory := testkit.Path("examples/policies/memory")
	namespaces := testkit.Path(golden.Namespaces)
	cases := []struct {
		name   string
		stdin  string
		extra  []string
		code   int
		stderr []string
	}{
		{"empty stdin", "", nil, command.ExitError, []string{"no objects in the input (-)"}},
		{"only comments", "# nothing\n---\n", nil, command.ExitError, []string{"no objects in the input"}},
		{"configmap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: sandboxes}\n", nil, command.ExitOK,
			[]string{"ConfigMap sandboxes/cm: not a pod or a workload with a pod template: passed through unchanged"}},
		{"lowercase kind", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "kind: Pod", "kind: pod", 1), nil, command.ExitOK,
			[]string{`pod sandboxes/p: kind "pod" is not "Pod" (kinds are case-sensitive; the apiserver knows no "pod"): passed through unchanged`}},
		{"lowercase kind --predict", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "kind: Pod", "kind: pod", 1), []string{"--predict"}, command.ExitRejected,
			[]string{`check: pod sandboxes/p: would be rejected: no kind "pod" is registered (did you mean "Pod"?)`}},
		{"unknown field", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "containers:", "contaners:", 1), []string{"--predict"}, command.ExitRejected,
			[]string{`  unknown field "spec.contaners": the apiserver rejects it`, `  - strict decoding error: unknown field "spec.contaners"`, "  - spec.containers: Required value"}},
		{"namespace not in --namespaces", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "sandboxes", "sandbxes", 1), []string{"--namespaces", namespaces}, command.ExitOK,
			[]string{`note: namespace "sandbxes" is not in --namespaces ` + namespaces + `: the policies and --predict see none of its labels`}},
		{"nested list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - " +
			strings.ReplaceAll(strings.TrimSuffix(fmt.Sprintf(sandboxPodYAML, "inner"), "\n"), "\n", "\n    ") + "\n", nil, command.ExitOK,
			[]string{"List : a List inside a List: its 1 items are mutated in place", "Pod sandboxes/inner:\n  sandbox-seed: matched"}},
		{"items of another kind", "apiVersion: example.com/v1\nkind: Inventory\nmetadata: {name: inv, namespace: sandboxes}\nitems:\n- a\n- b\n", nil, command.ExitOK,
			[]string{"Inventory sandboxes/inv: not a pod or a workload with a pod template: passed through unchanged"}},
		{"duplicate container names", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "[{name: c, image: i}]", "[{name: c, image: i}, {name: c, image: j}]", 1), []string{"--predict"}, command.ExitRejected,
			[]string{`  - spec.containers[1].name: Duplicate value: "c"`}},
		{"negative request", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "image: i}", "image: i, resources: {requests: {cpu: \"-1\"}}}", 1), []string{"--predict"}, command.ExitRejected,
			[]string{`  - spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`}},
		{"control characters", strings.Replace(fmt.Sprintf(sandboxPodYAML, "p"), "name: c,", "name: \"c\\e[2J\",", 1), []string{"--predict"}, command.ExitOK,
			[]string{`check: Pod sandboxes/p: accepted`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"dry-run", "-p", memory, "-f", "-"}, c.extra...)
			_, stderr, code := commandtest.RunCLI(t, cli, c.stdin, args...)
			if code != c.code {
				t.Errorf("exit code %d, want %d:\n%s", code, c.code, stderr)
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if strings.ContainsRune(stderr, 0x1b) {
				t.Errorf("stderr holds a raw escape character:\n%q", stderr)
			}
		})
	}
}

// TestReportEscapesControlCharacters: a pod and container named with
// terminal escapes are printed escaped in every report line.
func TestReportEscapesControlCharacters(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: \"p\\e[2J\"\n  namespace: sandboxes\n  labels: {app: sandbox}\nspec:\n  containers:\n  - name: \"grader\\e[2J\"\n    image: i\n    env: [{name: UV_LINK_MODE, value: hardlink}]\n"
	_, stderr, _ := commandtest.RunCLI(t, cli, pod, "dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", "-", "--predict", "-o", "diff")
	if strings.ContainsRune(stderr, 0x1b) {
		t.Fatalf("stderr holds a raw escape character:\n%q", stderr)
	}
	for _, want := range []string{`Pod sandboxes/p\x1b[2J:`, `container "grader\x1b[2J" sets its own UV_LINK_MODE`, `check: Pod sandboxes/p\x1b[2J: accepted`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestInputLimits: alias expansion and object size are bounded, with an
// error that says so; before, a 1 MB file of aliases took gigabytes.
func TestInputLimits(t *testing.T) {
	memory := testkit.Path("examples/policies/memory")
	var laughs strings.Builder
	laughs.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a: &a \"" + strings.Repeat("x", 1<<16) + "\"\n")
	prev := "a"
	for i := range 8 {
		name := fmt.Sprintf("l%d", i)
		fmt.Fprintf(&laughs, "  %s: &%s [%s]\n", name, name, strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ","))
		prev = name
	}
	huge := fmt.Sprintf(sandboxPodYAML, "big") + "  # " + strings.Repeat("y", input.MaxObjectBytes) + "\n"
	hugeItem := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(huge, "\n"), "\n", "\n  ") + "\n"
	cases := []struct{ name, stdin, want string }{
		{"aliases", laughs.String(), "stdin: document 1: YAML aliases expand to more than 8 MiB"},
		{"document", huge, "stdin: document 1: larger than 8 MiB"},
		{"list item", hugeItem, "stdin: document 1, item 1: larger than 8 MiB"},
		{"json value", `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"` + strings.Repeat("z", input.MaxObjectBytes+1<<17) + `"}}`, "stdin: document 1: larger than 8 MiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := commandtest.RunCLI(t, cli, c.stdin, "dry-run", "-p", memory, "-f", "-")
			if code != command.ExitError || !strings.Contains(stderr, c.want) {
				t.Errorf("exit code %d, want %d with %q:\n%.2000s", code, command.ExitError, c.want, stderr)
			}
		})
	}
}

// TestStreamedListOutput: a List read item by item is written byte for byte
// as marshalling the whole List writes it, in YAML and JSON, from YAML (block
// and flow style, items indented or not) and from JSON (kubectl's key order:
// kind after the items).
func TestStreamedListOutput(t *testing.T) {
	memory := testkit.Path("examples/policies/memory")
	var items []any
	for _, name := range []string{"basic", "init-and-sidecar", "not-sandbox", "windows"} {
		b, err := os.ReadFile(testkit.Path("testdata/pods/" + name + ".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		items = append(items, v)
	}
	items = append(items, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "sandboxes"}, "data": map[string]any{"long": strings.Repeat("a long value ", 12)}})
	list := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items}
	blockYAML, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	indented := "kind: List\napiVersion: v1\nitems:\n" + strings.ReplaceAll("  "+strings.TrimSuffix(string(blockYAML[strings.Index(string(blockYAML), "items:\n")+7:strings.Index(string(blockYAML), "kind: List")]), "\n"), "\n", "\n  ") + "\nmetadata: {resourceVersion: \"\"}\n"
	flow, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	kubectlJSON, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]string{
		"yaml block":    string(blockYAML),
		"yaml indented": indented,
		"yaml flow":     "# flow style is read whole\n" + string(flow) + "\n",
		"json":          string(kubectlJSON),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			for _, format := range []string{"yaml", "json"} {
				stdout, stderr, code := commandtest.RunCLI(t, cli, in, "dry-run", "-p", memory, "-f", "-", "-o", format)
				if code != command.ExitOK {
					t.Fatalf("exit code %d:\n%s", code, stderr)
				}
				// The whole List, mutated, marshalled at once.
				var whole any
				if err := yaml.Unmarshal([]byte(stdout), &whole); err != nil {
					t.Fatalf("-o %s output does not parse: %v\n%s", format, err, stdout)
				}
				var want []byte
				if format == "yaml" {
					want, err = yaml.Marshal(whole)
				} else {
					want, err = json.MarshalIndent(whole, "", "  ")
					want = append(want, '\n')
				}
				if err != nil {
					t.Fatal(err)
				}
				if stdout != string(want) {
					t.Errorf("-o %s differs from marshalling the whole List:\n--- got\n%s\n--- want\n%s", format, stdout, want)
				}
				if strings.Count(stderr, "sandbox-seed: matched") != 2 {
					t.Errorf("want the two sandbox pods mutated:\n%s", stderr)
				}
			}
		})
	}
	// An empty List (kubectl get of an empty namespace) is zero pods:
	// passed through, said, and not an error (TestEmptyList).
	stdout, stderr, code := commandtest.RunCLI(t, cli, `{"apiVersion":"v1","items":[],"kind":"List","metadata":{}}`, "dry-run", "-p", memory, "-f", "-")
	if code != command.ExitOK || !strings.Contains(stdout, "items: []") || !strings.Contains(stderr, "hold no items") {
		t.Errorf("an empty List: exit code %d:\n%s%s", code, stdout, stderr)
	}
}
