//go:build kyvernoparity

// Package kyvernoparity holds `make kyverno-parity`: each Kyverno policy of
// testdata/kyverno that imports exactly is applied to the golden pods by
// Kyverno's own engine (its CLI, built from the Go module proxy), and its
// import by dry-run; the two pods must be equal field for field, but for
// the differences listed in intended (and in docs/migrate-from-kyverno.md),
// each with its reason.
package kyvernoparity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

// policies are the corpus policies that import exactly and match Pods.
var policies = []string{"notes-memory.yaml", "notes-disk.yaml", "data-foreach.yaml", "proxy-env.yaml",
	"foreach-lists.yaml", "foreach-lists-init.yaml", "init-pair.yaml", "autogen.yaml", "foreach-names.yaml", "anchor-names.yaml",
	"runtime-keep.yaml", "image-mirror.yaml", "placement.yaml", "path-append.yaml"}

// leftOut are the corpus policies of policies that import with parts left
// out (--allow-partial, exit 5), and the rules left out: the import must
// name exactly these, and Kyverno applies the policy without them, so that
// what converted is compared with what Kyverno does.
var leftOut = map[string][]string{}

// envEntries are the corpus policies of policies whose rules add to the
// containers' own list variables (ENTRY:{{ own }} or {{ own }}:ENTRY), and
// what their values put before and after the container's own value. On a
// container that sets the variable to a plain value without the entry in
// its place, Kyverno and the imported env entry must give the same; on the
// others they differ as the import says (docs/migrate-from-kyverno.md), and
// takeEnvEntries checks what each gives there.
var envEntries = map[string][]envEntry{
	"placement.yaml":   {{name: "PATH", before: "/opt/tools/bin:"}},
	"path-append.yaml": {{name: "PATH", before: "/opt/tools/bin:"}, {name: "PYTHONPATH", after: ":/opt/tools/lib"}},
}

type envEntry struct{ name, before, after string }

// The containers takeEnvEntries tells apart.
const (
	entryByValue   = "set by value"
	entryUnset     = "not set"
	entryValueFrom = "set from valueFrom"
	entryInPlace   = "set with the entry in place"
)

// templatePolicies are the corpus policies that import exactly and edit
// workloads' pod templates: by rules written for the workloads, or by the
// rules Kyverno generates from a Pod rule (autogen). Kyverno applies each to
// every golden pod wrapped in a Deployment and in a CronJob; the pod
// template it returns must be what dry-run of the import makes of the pod.
var templatePolicies = []string{"workload-template.yaml", "autogen.yaml", "foreach-lists.yaml", "init-pair.yaml", "foreach-names.yaml", "anchor-names.yaml", "runtime-keep.yaml"}

// The differences docs/migrate-from-kyverno.md lists as intended. Before
// the pods are compared, both are canonicalised (a typed round trip, as the
// apiserver stores them: 2048Mi is 2Gi) and the lists whose elements
// Kubernetes keys by name or mount path are sorted: Kyverno's strategic
// merge puts what it adds first, the webhook last (so that $(VAR)
// references to a pod's own variables keep resolving); order has no other
// meaning in them. Then these are taken out of the webhook's pod:
//
//   - the sandbox-webhook.io/status annotation, which records what each
//     policy did (from both pods: the webhook replaces one the pod forged);
//   - in disk mode, the medium of the pod's own memory-backed emptyDirs,
//     which the webhook moves to disk too;
//   - the pod-level memory request, which the webhook always sets (else the
//     apiserver defaults it to the limit), where Kyverno's pod has none;
//   - a pod-level memory limit the webhook raised to what the pod's
//     containers ask for.
//
// podDifferences are the corpus pods on which the two differ on purpose, and
// why; each must still differ, or the entry is stale.
var podDifferences = map[string]string{
	"existing-uv-cache-volume":        "the pod has its own volume named like the cache: the webhook keeps it as it is; Kyverno's merge rewrites its sizeLimit and mounts it at the cache path",
	"existing-uv-mount":               "the pod mounts its own volume at the cache path: the webhook keeps it; Kyverno's merge (keyed by mountPath) replaces the pod's mount with its cache",
	"mount-paths-spelled-differently": "the pod mounts its own volumes at /root/.cache/uv/ and /root/.cache: the webhook keeps them; Kyverno adds a second mount at the same place, which the container runtime cannot honour",
	"hostile-writable-sidecar":        "a container mounts a volume named like the cache elsewhere: the webhook injects no cache for it; Kyverno adds the volume under the pod's mount",
	"hostile-mount-elsewhere":         "a container mounts, writable at /data, an undeclared volume named like the host-path asset: the webhook injects nothing (the apiserver refuses the pod); Kyverno declares the volume, handing the container the host path read-write",
	"hostile-forged-status":           "the pod mounts the asset's volume with propagation from the host and forges the status annotation: the webhook injects nothing; Kyverno declares the host path under that mount",
	"hostile-own-volume":              "the pod has its own volume named like the host-path asset: the webhook keeps it; Kyverno's merge adds the host path to it, writable at the pod's mount",
	"windows":                         "a Windows pod: the webhook leaves it (no tmpfs, no uv cache path there); the Kyverno policy has no such exception",
	"own-toleration":                  "the pod has a toleration of its own: Kyverno's strategic merge replaces the pod's tolerations with the policy's (core/v1 gives the list no merge key); the webhook adds the policy's to them",
}

func TestKyvernoParity(t *testing.T) {
	root, err := harness.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	kyverno, cli := os.Getenv("KYVERNO"), os.Getenv("SANDBOX_WEBHOOK_CLI")
	for _, bin := range []string{kyverno, cli} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%v: make kyverno-parity builds the binaries and sets KYVERNO and SANDBOX_WEBHOOK_CLI", err)
		}
	}
	dir := t.TempDir()
	namespaces := namespaceFile(t, root, dir)
	pods := namedPods(t, root, dir)
	// The pods as workloads, each kind in a directory of its own: Kyverno
	// names its output after the resource.
	workloads := map[string][]string{}
	for _, kind := range []string{"Deployment", "CronJob"} {
		workloads[kind] = wrapPods(t, pods, filepath.Join(dir, strings.ToLower(kind)+"s"), kind)
	}
	compared, mutated := 0, 0
	differed := map[string]bool{}
	compare := func(t *testing.T, p, imported, name, pod string, want any, entries map[string]int) {
		t.Helper()
		webhook, _ := run(t, "", cli, "dry-run", "-p", imported, "-f", pod, "--namespaces", namespaces, "-o", "json")
		got := generic(t, webhook, "dry-run of "+pod)
		compared++
		orig := generic(t, read(t, pod), pod)
		if !cmp.Equal(orig, want) {
			mutated++
		}
		w, g := canonical(t, want), canonical(t, got)
		takeIntended(w, g, strings.Contains(string(read(t, imported)), "mode: disk"))
		if e, ok := envEntries[p]; ok {
			takeEnvEntries(t, name, e, canonical(t, orig), w, g, entries)
		}
		diffs := unexplained(w, g, "")
		reason, listed := podDifferences[name]
		switch {
		case listed && len(diffs) > 0:
			differed[name] = true
			t.Logf("%s, pod %s: intended: %s (%d differences)", p, name, reason, len(diffs))
		default:
			for _, d := range diffs {
				t.Errorf("%s, pod %s: %s", p, name, d)
			}
		}
	}
	// apply runs Kyverno's engine on resources and returns the directory
	// of what it mutated.
	apply := func(t *testing.T, kyvernoPolicy, out string, resources []string) string {
		t.Helper()
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		args := []string{"apply", kyvernoPolicy, "--values-file", filepath.Join(dir, "values.yaml"), "-o", out, "--remove-color"}
		for _, r := range resources {
			args = append(args, "--resource", r)
		}
		run(t, "", kyverno, args...)
		return out
	}
	importPolicy := func(t *testing.T, p string) (kyvernoPolicy, imported string) {
		t.Helper()
		kyvernoPolicy = filepath.Join(root, "testdata", "kyverno", p)
		imported = filepath.Join(dir, strings.TrimSuffix(p, ".yaml")+".sandbox.yaml")
		var out, stderr []byte
		if rules, ok := leftOut[p]; ok {
			out, stderr = runExit(t, 5, cli, "import", "kyverno", "--allow-partial", kyvernoPolicy)
			kyvernoPolicy = withoutRules(t, kyvernoPolicy, filepath.Join(dir, "converted-"+p), rules, stderr)
		} else {
			out, stderr = run(t, "", cli, "import", "kyverno", kyvernoPolicy)
		}
		if err := os.WriteFile(imported, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("import: %s", bytes.TrimSpace(stderr))
		return kyvernoPolicy, imported
	}
	for _, p := range policies {
		t.Run(p, func(t *testing.T) {
			kyvernoPolicy, imported := importPolicy(t, p)
			kyvernoOut := apply(t, kyvernoPolicy, filepath.Join(dir, "kyverno-"+strings.TrimSuffix(p, ".yaml")), pods)
			entries := map[string]int{}
			for _, pod := range pods {
				name := podName(t, pod)
				want := generic(t, read(t, pod), pod)
				if b, err := os.ReadFile(filepath.Join(kyvernoOut, name+"-mutated.yaml")); err == nil {
					want = generic(t, b, "kyverno's "+name)
				}
				compare(t, p, imported, name, pod, want, entries)
			}
			if _, ok := envEntries[p]; ok {
				t.Logf("%s: containers by their own value of the variables it adds to: %v", p, entries)
				for _, c := range []string{entryByValue, entryUnset, entryValueFrom, entryInPlace} {
					if entries[c] == 0 {
						t.Errorf("%s: no corpus container with the variables %s: the comparison of that case proves nothing", p, c)
					}
				}
			}
		})
	}
	for _, p := range templatePolicies {
		for _, kind := range []string{"Deployment", "CronJob"} {
			t.Run(p+"/"+kind, func(t *testing.T) {
				kyvernoPolicy, imported := importPolicy(t, p)
				kyvernoOut := apply(t, kyvernoPolicy, filepath.Join(dir, "kyverno-"+strings.TrimSuffix(p, ".yaml")+"-"+kind), workloads[kind])
				for _, pod := range pods {
					name := podName(t, pod)
					want := generic(t, read(t, pod), pod)
					if b, err := os.ReadFile(filepath.Join(kyvernoOut, name+"-mutated.yaml")); err == nil {
						want = podOf(t, want, generic(t, b, "kyverno's "+kind+" "+name), kind)
					}
					compare(t, p+" on a "+kind, imported, name, pod, want, nil)
				}
			})
		}
	}
	for name := range podDifferences {
		if !differed[name] {
			t.Errorf("pod %s is listed in podDifferences, yet no policy's result differs on it", name)
		}
	}
	t.Logf("%d pod and policy pairs compared, %d mutated by Kyverno", compared, mutated)
	if mutated < compared/4 {
		t.Errorf("Kyverno mutated only %d of %d: the corpus policies miss the pods, and parity proves nothing", mutated, compared)
	}
}

// takeEnvEntries checks, in each app container of a pod that the policy
// matches (app: sandbox), what Kyverno (want) and the webhook (got) made of
// each variable entries add to, given the container's own (orig); where
// they differ as the import says, it checks what each gives and makes
// want the webhook's, for the rest of the pod to be compared. seen counts
// the containers of each case.
func takeEnvEntries(t *testing.T, pod string, entries []envEntry, orig, want, got map[string]any, seen map[string]int) {
	t.Helper()
	if nested(orig, "metadata", "labels", "app") != "sandbox" {
		return
	}
	oc, _ := nested(orig, "spec", "containers").([]any)
	wc, _ := nested(want, "spec", "containers").([]any)
	gc, _ := nested(got, "spec", "containers").([]any)
	if len(oc) != len(wc) || len(oc) != len(gc) {
		t.Errorf("pod %s: %d containers, Kyverno's %d, the webhook's %d", pod, len(oc), len(wc), len(gc))
		return
	}
	for i := range oc {
		cname := nested(oc[i], "name")
		for _, e := range entries {
			own, w, g := envOf(oc[i], e.name), envOf(wc[i], e.name), envOf(gc[i], e.name)
			value, _ := own["value"].(string)
			entry := strings.TrimSuffix(e.before, ":") + strings.TrimPrefix(e.after, ":")
			at := fmt.Sprintf("pod %s, container %s, %s", pod, cname, e.name)
			var kyverno map[string]any
			var c string
			switch {
			case own == nil:
				c, kyverno = entryUnset, map[string]any{"name": e.name, "value": e.before + "null" + e.after}
			case own["valueFrom"] != nil:
				c, kyverno = entryValueFrom, map[string]any{"name": e.name, "value": e.before + "null" + e.after, "valueFrom": own["valueFrom"]}
			case e.before != "" && strings.HasPrefix(value, e.before) || e.after != "" && strings.HasSuffix(value, e.after) || value == entry:
				c, kyverno = entryInPlace, map[string]any{"name": e.name, "value": e.before + value + e.after}
			default:
				seen[entryByValue]++
				continue // by value: compared with the rest of the pod
			}
			seen[c]++
			if !cmp.Equal(w, kyverno) {
				t.Errorf("%s %s: Kyverno gives %v, the import says %v", at, c, w, kyverno)
			}
			if !cmp.Equal(g, own) {
				t.Errorf("%s %s: the webhook gives %v, want the container's own %v", at, c, g, own)
			}
			setEnv(wc[i], e.name, g)
		}
	}
}

// envOf is the container's env var of the name, nil without one.
func envOf(c any, name string) map[string]any {
	env, _ := nested(c, "env").([]any)
	for _, e := range env {
		if m, _ := e.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// setEnv makes the container's env var of the name v, or drops it when v
// is nil.
func setEnv(c any, name string, v map[string]any) {
	cm := c.(map[string]any)
	env, _ := cm["env"].([]any)
	var out []any
	for _, e := range env {
		if m, _ := e.(map[string]any); m["name"] != name {
			out = append(out, e)
		}
	}
	if v != nil {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b any) int {
		return strings.Compare(a.(map[string]any)["name"].(string), b.(map[string]any)["name"].(string))
	})
	if len(out) == 0 {
		delete(cm, "env")
		return
	}
	cm["env"] = out
}

// templatePaths are where a workload of each kind keeps its pod template.
var templatePaths = map[string][]string{
	"Deployment": {"spec", "template"},
	"CronJob":    {"spec", "jobTemplate", "spec", "template"},
}

// wrapPods writes each pod into dir as a workload of kind (Deployment or
// CronJob) whose pod template is the pod: its labels, annotations and spec.
func wrapPods(t *testing.T, pods []string, dir, kind string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range pods {
		pod := generic(t, read(t, f), f).(map[string]any)
		md := pod["metadata"].(map[string]any)
		tmplMeta := map[string]any{}
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := md[k]; ok {
				tmplMeta[k] = v
			}
		}
		template := map[string]any{"metadata": tmplMeta, "spec": pod["spec"]}
		w := map[string]any{"metadata": map[string]any{"name": md["name"], "namespace": md["namespace"]}}
		switch kind {
		case "Deployment":
			labels, _ := md["labels"].(map[string]any)
			w["apiVersion"], w["kind"] = "apps/v1", kind
			w["spec"] = map[string]any{"selector": map[string]any{"matchLabels": labels}, "template": template}
		case "CronJob":
			w["apiVersion"], w["kind"] = "batch/v1", kind
			w["spec"] = map[string]any{"schedule": "@hourly", "jobTemplate": map[string]any{"spec": map[string]any{"template": template}}}
		}
		path := filepath.Join(dir, filepath.Base(f))
		write(t, path, w)
		out = append(out, path)
	}
	return out
}

// podOf is the pod Kyverno's mutated workload creates: the pod as it was,
// with the workload's pod template's labels, annotations and spec.
func podOf(t *testing.T, pod, workload any, kind string) any {
	t.Helper()
	template, ok := nested(workload, templatePaths[kind]...).(map[string]any)
	if !ok {
		t.Fatalf("Kyverno's %s has no pod template: %v", kind, workload)
	}
	out := pod.(map[string]any)
	md := out["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations"} {
		delete(md, k)
		if v := nested(template, "metadata", k); v != nil {
			md[k] = v
		}
	}
	out["spec"] = template["spec"]
	return out
}

// unexplained lists the differences between Kyverno's pod (want) and the
// webhook's (got) that intended does not name.
func unexplained(want, got any, path string) []string {
	if cmp.Equal(want, got) {
		return nil
	}
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		var out []string
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			out = append(out, unexplained(wm[k], gm[k], path+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k))...)
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []string
		for i := range wl {
			out = append(out, unexplained(wl[i], gl[i], fmt.Sprintf("%s/%d", path, i))...)
		}
		return out
	}
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	return []string{fmt.Sprintf("%s: Kyverno %s, webhook %s", path, w, g)}
}

// canonical is the pod as the apiserver would store it, its keyed lists
// sorted.
func canonical(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(b, &pod); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(pod.Spec.Volumes, func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) })
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			slices.SortFunc(cs[i].VolumeMounts, func(a, b corev1.VolumeMount) int { return strings.Compare(a.MountPath, b.MountPath) })
			slices.SortFunc(cs[i].Env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
		}
	}
	if b, err = json.Marshal(&pod); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// takeIntended takes out of the webhook's pod (got) what it does on
// purpose beyond Kyverno's (want), as the comment on podDifferences says.
func takeIntended(want, got map[string]any, disk bool) {
	for _, pod := range []map[string]any{want, got} {
		if md, ok := pod["metadata"].(map[string]any); ok {
			if a, ok := md["annotations"].(map[string]any); ok {
				delete(a, "sandbox-webhook.io/status")
				if len(a) == 0 {
					delete(md, "annotations")
				}
			}
		}
	}
	if disk {
		wv, _ := nested(want, "spec", "volumes").([]any)
		gv, _ := nested(got, "spec", "volumes").([]any)
		for i := range min(len(wv), len(gv)) {
			wm, gm := wv[i].(map[string]any), gv[i].(map[string]any)
			if nested(wm, "emptyDir", "medium") == "Memory" && nested(gm, "emptyDir") != nil && nested(gm, "emptyDir", "medium") == nil && wm["name"] == gm["name"] {
				gm["emptyDir"].(map[string]any)["medium"] = "Memory"
			}
		}
	}
	wr, _ := nested(want, "spec", "resources").(map[string]any)
	gr, _ := nested(got, "spec", "resources").(map[string]any)
	if gr == nil {
		return
	}
	if req, ok := gr["requests"].(map[string]any); ok && nested(wr, "requests", "memory") == nil {
		delete(req, "memory")
		if len(req) == 0 {
			delete(gr, "requests")
		}
	}
	wl, _ := nested(wr, "limits", "memory").(string)
	gl, _ := nested(gr, "limits", "memory").(string)
	if wl != "" && gl != "" && wl != gl {
		w, werr := resource.ParseQuantity(wl)
		g, gerr := resource.ParseQuantity(gl)
		if werr == nil && gerr == nil && g.Cmp(w) > 0 {
			gr["limits"].(map[string]any)["memory"] = wl
		}
	}
}

func nested(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// namespaceFile writes the corpus namespaces, labelled as the corpus
// policies select them, for dry-run, and the same as Kyverno's values file.
func namespaceFile(t *testing.T, root, dir string) string {
	t.Helper()
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal(read(t, filepath.Join(root, "testdata", "namespaces.yaml")), &list); err != nil {
		t.Fatal(err)
	}
	for _, ns := range list.Items {
		md := ns["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		labels["sandbox.io/enabled"] = "true"
		labels["kubernetes.io/metadata.name"] = md["name"]
		md["labels"] = labels
	}
	nsFile := filepath.Join(dir, "namespaces.yaml")
	write(t, nsFile, map[string]any{"apiVersion": "v1", "kind": "List", "items": list.Items})
	write(t, filepath.Join(dir, "values.yaml"), map[string]any{
		"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Value",
		"namespaces":   list.Items,
		"globalValues": map[string]any{"request.operation": "CREATE"},
	})
	return nsFile
}

// withoutRules writes the Kyverno policy at path without the named rules
// into out, after checking that the import's report (stderr) leaves out
// parts of those rules and of no other.
func withoutRules(t *testing.T, path, out string, rules []string, stderr []byte) string {
	t.Helper()
	var named []string
	for line := range strings.Lines(string(stderr)) {
		if !strings.HasPrefix(line, "left out: ") && !strings.HasPrefix(line, "refused: ") {
			continue
		}
		_, rest, _ := strings.Cut(line, " rule ")
		rule, _, _ := strings.Cut(rest, ":")
		if !slices.Contains(named, rule) {
			named = append(named, rule)
		}
	}
	if !slices.Equal(named, rules) {
		t.Fatalf("the import of %s leaves out parts of rules %v; leftOut says %v", path, named, rules)
	}
	policy := generic(t, read(t, path), path).(map[string]any)
	spec := policy["spec"].(map[string]any)
	var kept []any
	for _, r := range spec["rules"].([]any) {
		if !slices.Contains(rules, r.(map[string]any)["name"].(string)) {
			kept = append(kept, r)
		}
	}
	spec["rules"] = kept
	write(t, out, policy)
	return out
}

// namedPods copies the corpus pods, and the pods kept for the parity of
// the Kyverno corpus alone (testdata/kyverno/pods), into dir, naming those
// that have only a generateName after their file: Kyverno's CLI needs a
// name for each.
func namedPods(t *testing.T, root, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "testdata", "pods", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus pods: %v", err)
	}
	own, err := filepath.Glob(filepath.Join(root, "testdata", "kyverno", "pods", "*.yaml"))
	if err != nil || len(own) == 0 {
		t.Fatalf("no Kyverno corpus pods: %v", err)
	}
	files = append(files, own...)
	if err := os.MkdirAll(filepath.Join(dir, "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		pod := generic(t, read(t, f), f).(map[string]any)
		md := pod["metadata"].(map[string]any)
		if md["name"] == nil {
			md["name"] = strings.TrimSuffix(filepath.Base(f), ".yaml")
			delete(md, "generateName")
		}
		path := filepath.Join(dir, "pods", filepath.Base(f))
		write(t, path, pod)
		out = append(out, path)
	}
	return out
}

func write(t *testing.T, path string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func podName(t *testing.T, path string) string {
	t.Helper()
	var pod struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(read(t, path), &pod); err != nil {
		t.Fatal(err)
	}
	return pod.Metadata.Name
}

// generic decodes one YAML or JSON object (the first document).
func generic(t *testing.T, b []byte, what string) any {
	t.Helper()
	doc, _, _ := bytes.Cut(b, []byte("\n---"))
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// run runs a binary, failing the test unless it exits 0.
func run(t *testing.T, stdin, bin string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, out.Bytes(), errOut.Bytes())
	}
	return out.Bytes(), errOut.Bytes()
}

// runExit runs a binary, failing the test unless it exits with code.
func runExit(t *testing.T, code int, bin string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if got := cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("%s %s: exit %d (%v), want %d\n%s%s", filepath.Base(bin), strings.Join(args, " "), got, err, code, out.Bytes(), errOut.Bytes())
	}
	return out.Bytes(), errOut.Bytes()
}
