// Package golden is the shared golden corpus of sandbox-webhook's tests: the
// input pods in testdata/pods, the policy sets they run under, and the
// expected output in testdata/golden/<set>/. The mutation core, the dry-run
// CLI, the admission handler and the e2e suite all read the same files, so
// they cannot disagree.
//
// Set REFRESH_GOLDEN=true to rewrite the expected files; a golden file whose
// input no longer exists fails the test.
package golden

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Set is a named set of policies the corpus runs under.
type Set struct {
	Name string
	// Policies are files or directories, relative to the repository root.
	Policies []string
	// LeakMitigation is the --leak-mitigation override ("" means policy).
	LeakMitigation string
	// NoMAP is, for a set that mapexport refuses to export, what its
	// refusal says, so the MAP tests check the refusal instead of the
	// MAP's pods.
	NoMAP string
	// AllPods: the e2e webhook configuration of the set has no
	// objectSelector (the chart's default, app=sandbox, would never send
	// the pods of frameworks that label them otherwise).
	AllPods bool
}

// Sets are the policy sets every corpus pod is run under.
var Sets = []Set{
	{Name: "memory", Policies: []string{"examples/policies/memory"}},
	{Name: "disk", Policies: []string{"examples/policies/disk"}},
	{Name: "memory-forced-disk", Policies: []string{"examples/policies/memory"}, LeakMitigation: "on"},
	{Name: "hostpath-only", Policies: []string{"testdata/policies/hostpath-only.yaml"}},
	// Several policies at once: order, conflicts, override, container
	// selection, container-level memory and a shadow policy.
	{Name: "multi", Policies: []string{"testdata/policies/multi"}},
	// One policy for a mixed fleet: match.any, one block per framework.
	{Name: "fleet", Policies: []string{"examples/policies/fleet"}, NoMAP: "match.any cannot be exported to a MutatingAdmissionPolicy yet", AllPods: true},
	// Container limits raised by the caches they mount.
	{Name: "raise", Policies: []string{"testdata/policies/raise.yaml"}, NoMAP: "containerLimits: raise cannot be exported to a MutatingAdmissionPolicy yet"},
	// The sandbox's /dev/shm and disk budget, in memory mode and forced
	// to disk (where the shm stays on tmpfs and the caches count in the
	// budget).
	{Name: "budget", Policies: []string{"testdata/policies/budget.yaml"}, NoMAP: "shm cannot be exported to a MutatingAdmissionPolicy yet"},
	{Name: "budget-forced-disk", Policies: []string{"testdata/policies/budget.yaml"}, LeakMitigation: "on", NoMAP: "shm cannot be exported to a MutatingAdmissionPolicy yet"},
	// Runtime placement, an image mirror and tool paths on PATH.
	{Name: "placement", Policies: []string{"examples/policies/placement"}, NoMAP: "runtime cannot be exported to a MutatingAdmissionPolicy yet"},
}

// Case is one corpus pod under one policy set.
type Case struct {
	Set Set
	// Name is the pod file's base name without .yaml.
	Name string
	// Input is the input pod file, relative to the repository root.
	Input string
	// Output is the expected dry-run -o yaml output (the mutated pod).
	Output string
	// Report is the expected dry-run stderr (decisions, warnings, --predict).
	Report string
}

// Namespaces is the file of Namespace objects the corpus pods live in.
const Namespaces = "testdata/namespaces.yaml"

// RuntimeClasses is the file of RuntimeClass objects the corpus pods name.
const RuntimeClasses = "testdata/runtimeclasses.yaml"

// Policies loads the policy files and directories at the repository-relative
// paths rel, failing t if they do not load.
func Policies(t testing.TB, rel ...string) *policy.Set {
	t.Helper()
	abs := make([]string, len(rel))
	for i, p := range rel {
		abs[i] = testkit.Path(p)
	}
	set, err := policy.Load(abs...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Cases returns every corpus case, in a stable order.
func Cases(t testing.TB) []Case {
	t.Helper()
	inputs, err := filepath.Glob(testkit.Path("testdata/pods/*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no corpus pods in testdata/pods: %v", err)
	}
	sort.Strings(inputs)
	var out []Case
	for _, s := range Sets {
		for _, in := range inputs {
			name := strings.TrimSuffix(filepath.Base(in), ".yaml")
			dir := filepath.Join("testdata", "golden", s.Name)
			out = append(out, Case{
				Set:    s,
				Name:   name,
				Input:  filepath.Join("testdata", "pods", name+".yaml"),
				Output: filepath.Join(dir, name+".yaml"),
				Report: filepath.Join(dir, name+".report"),
			})
		}
	}
	return out
}

// Refresh reports whether REFRESH_GOLDEN asks to rewrite golden files.
func Refresh() bool { return os.Getenv("REFRESH_GOLDEN") == "true" }

// Compare checks got against the golden file at rel (repository-relative),
// or rewrites it when Refresh().
func Compare(t testing.TB, rel string, got []byte) {
	t.Helper()
	path := testkit.Path(rel)
	if Refresh() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file %s: %v (run with REFRESH_GOLDEN=true to create it)", rel, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with REFRESH_GOLDEN=true to update it after checking the change):\n--- got\n%s\n--- want\n%s", rel, got, want)
	}
}

// CheckStale fails when testdata/golden holds a file no case produces.
func CheckStale(t testing.TB) {
	t.Helper()
	want := map[string]bool{}
	for _, c := range Cases(t) {
		want[filepath.Clean(c.Output)] = true
		want[filepath.Clean(c.Report)] = true
	}
	root := testkit.Path("testdata/golden")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(testkit.Root(), p)
		if !want[rel] {
			if Refresh() {
				return os.Remove(p)
			}
			t.Errorf("stale golden file %s: no corpus case produces it (delete it, or run with REFRESH_GOLDEN=true)", rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// NamespaceLabels returns the labels of the corpus namespaces by name.
func NamespaceLabels(t testing.TB) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile(testkit.Path(Namespaces))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []corev1.Namespace `json:"items"`
	}
	if err := yaml.Unmarshal(raw, &list); err != nil {
		t.Fatalf("%s: %v", Namespaces, err)
	}
	out := map[string]map[string]string{}
	for _, ns := range list.Items {
		labels := map[string]string{"kubernetes.io/metadata.name": ns.Name}
		maps.Copy(labels, ns.Labels)
		out[ns.Name] = labels
	}
	return out
}

// Pod reads a pod YAML file (repository-relative) and returns it as JSON, the
// way an AdmissionReview carries it, and decoded.
func Pod(t testing.TB, rel string) ([]byte, *corev1.Pod) {
	t.Helper()
	raw, err := os.ReadFile(testkit.Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(js, pod); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return js, pod
}
