package dryrun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// TestDryRunMAP: dry-run --map reports, for every corpus pod under every
// policy set, that the exported MAP gives the webhook's pod (the multi set's
// shadow policy, a gap, changes no pod); the -o output is the webhook's,
// unchanged by --map. One run per set, of every corpus pod at once.
func TestDryRunMAP(t *testing.T) {
	var pods []string
	for _, c := range golden.Cases(t) {
		if c.Set.Name == golden.Sets[0].Name {
			b, err := os.ReadFile(testkit.Path(c.Input))
			if err != nil {
				t.Fatal(err)
			}
			pods = append(pods, string(b))
		}
	}
	input := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(input, []byte(strings.Join(pods, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, set := range golden.Sets {
		t.Run(set.Name, func(t *testing.T) {
			args := []string{"dry-run", "--map", "-f", input, "--namespaces", testkit.Path(golden.Namespaces)}
			for _, p := range set.Policies {
				args = append(args, "--policy", testkit.Path(p))
			}
			if set.LeakMitigation != "" {
				args = append(args, "--leak-mitigation="+set.LeakMitigation)
			}
			stdout, stderr, code := commandtest.RunCLI(t, cli, "", args...)
			if want := set.NoMAP; want != "" {
				if code == command.ExitOK || !strings.Contains(stderr, want) {
					t.Fatalf("exit code %d, want a failure naming %q:\n%s", code, want, stderr)
				}
				return
			}
			if code != command.ExitOK {
				t.Fatalf("exit code %d:\n%s", code, stderr)
			}
			if n := strings.Count(stderr, ": the MAP gives the same pod as the webhook\n"); n != len(pods) {
				t.Errorf("agreement reported for %d of %d pods:\n%s", n, len(pods), stderr)
			}
			plain, _, _ := commandtest.RunCLI(t, cli, "", slices.Delete(slices.Clone(args), 1, 2)...)
			if stdout != plain {
				t.Errorf("--map changed the output:\n%s\nwithout --map:\n%s", stdout, plain)
			}
		})
	}
}

// TestDryRunMAPGaps: dry-run --map names the gaps of a partial export.
func TestDryRunMAPGaps(t *testing.T) {
	_, stderr, code := commandtest.RunCLI(t, cli, "", "dry-run", "--map", "-p", testkit.Path("testdata/policies/multi"),
		"-f", testkit.Path("testdata/pods/basic.yaml"))
	if code != command.ExitOK {
		t.Fatalf("exit code %d:\n%s", code, stderr)
	}
	for _, want := range []string{
		"MutatingAdmissionPolicies (export-map): sandbox-webhook\n",
		`  gap: policy "c-shadow": enforcement: shadow: a MAP has no report-only mode`,
		"Pod sandboxes/basic: the MAP gives the same pod as the webhook\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestDryRunMAPBoundsQuantities: a quantity whose comparison would take the
// apiserver's quantity() minutes, in each place the exported policy reads
// one (a container's limit and request, the pod's, an emptyDir's sizeLimit,
// the status annotation's podMemory), is refused by the MAP before it is
// read, and by the webhook, and dry-run --map ends at once (30 s would be
// a hang: each is minutes when compared).
func TestDryRunMAPBoundsQuantities(t *testing.T) {
	const huge = "1e100000000"
	pod := func(name, spec, annotation string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: sandboxes\n  labels: {app: sandbox}\n" +
			annotation + "spec:\n" + spec
	}
	pods := []string{
		pod("container-limit", "  containers: [{name: main, image: i, resources: {limits: {memory: \""+huge+"\"}}}]\n", ""),
		pod("init-request", "  initContainers: [{name: init, image: i, resources: {requests: {memory: \""+huge+"\"}}}]\n  containers: [{name: main, image: i}]\n", ""),
		pod("pod-limit", "  resources: {limits: {memory: \""+huge+"\"}}\n  containers: [{name: main, image: i}]\n",
			"  annotations: {sandbox-webhook.io/status: '{\"policies\":[],\"podMemory\":{\"limit\":\"8Gi\"}}'}\n"),
		pod("cache-size", "  volumes: [{name: uv-cache, emptyDir: {medium: Memory, sizeLimit: \""+huge+"\"}}]\n  containers: [{name: main, image: i}]\n", ""),
		pod("annotation", "  resources: {limits: {memory: 8Gi}}\n  containers: [{name: main, image: i}]\n",
			"  annotations: {sandbox-webhook.io/status: '{\"policies\":[],\"podMemory\":{\"limit\":\""+huge+"\"}}'}\n"),
	}
	input := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(input, []byte(strings.Join(pods, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		_, stderr, _ := commandtest.RunCLI(t, cli, "", "dry-run", "--map", "-f", input, "--policy", testkit.Path("examples/policies/memory"), "-o", "summary")
		done <- stderr
	}()
	var stderr string
	select {
	case stderr = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("dry-run --map did not end within 30 s")
	}
	for _, name := range []string{"container-limit", "init-request", "pod-limit", "cache-size", "annotation"} {
		if want := "Pod sandboxes/" + name + ": the MAP rejects the pod: sandbox-webhook-sandbox-seed: mutation 0: "; !strings.Contains(stderr, want) ||
			!strings.Contains(stderr, "sandbox-webhook refuses the pod: a memory quantity of the pod or of its status annotation is beyond what any node holds") {
			t.Errorf("%s: not refused by the MAP's bound:\n%s", name, stderr)
		}
	}
}
