package main

import (
	"bytes"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

// TestDemoOnce runs the whole demo non-interactively, as `make demo` does
// but stopping after the summary, so that it cannot rot: the example pods are
// created through the webhook, the summary says what was injected, the full
// YAML and a kubeconfig are left behind, and nothing is left running.
func TestDemoOnce(t *testing.T) {
	root, err := harness.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	binary, err := harness.BuildWebhook(t.Context(), root, tmp)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := harness.BuildCLI(t.Context(), root, tmp)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "demo")
	var out bytes.Buffer
	// The command line the summary teaches must work against the demo as
	// printed (from the repository's root, as make demo runs).
	ran := 0
	explore := func(summary string) error {
		for line := range strings.SplitSeq(summary, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, cli+" ") {
				continue
			}
			ran++
			cmd := exec.CommandContext(t.Context(), "sh", "-c", line)
			cmd.Dir = root
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: %v\n%s", line, err, b)
			} else {
				t.Logf("%s:\n%s", line, b)
			}
		}
		return nil
	}
	err = run(t.Context(), options{once: true, dir: dir, webhook: binary, cli: cli, assets: filepath.Join(root, "bin"), explore: explore}, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"+ uv-cache  emptyDir, medium Memory (tmpfs), sizeLimit 1Gi",
		"+ /root/.cache/uv (uv-cache)",
		"+ /opt/rebench-v2 (rebench-v2, read-only)",
		"+ UV_LINK_MODE=copy",
		"pod memory  limit 8Gi, request 0 (set: a missing one would default to the limit)",
		"pod memory  limit 12Gi",                    // raised to the task's 12Gi limit
		"image registry.example.com/swe-rebench-v2", // the baseline namespace's asset
		"sets its own UV_LINK_MODE",                 // the warning kubectl would show
		"untouched  not a sandbox pod",              // the ordinary pod
		"--kubeconfig " + filepath.Join(dir, "kubeconfig") + " get pods",
		"Stopped; nothing is left running.",
		" check install --kubeconfig " + filepath.Join(dir, "kubeconfig") + " --policy ",
		// The chart's defaults, guard included, as helm install gives them.
		"the MutatingWebhookConfiguration (webhook.url → the local process) and webhook.guard's policies",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}

	if ran != 3 {
		t.Errorf("ran %d command lines of the summary, want check pod, check install and dry-run", ran)
	}

	files, err := filepath.Glob(filepath.Join(dir, "pods", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mutated, untouched := 0, 0
	for _, f := range files {
		pods, err := harness.LoadPods(f)
		if err != nil || len(pods) != 1 {
			t.Fatalf("%s: %v", f, err)
		}
		sandbox := pods[0].Labels["app"] == "sandbox"
		if harness.Mutated(pods[0]) != sandbox {
			t.Errorf("%s: app=sandbox %v, mutated %v", f, sandbox, harness.Mutated(pods[0]))
		}
		if sandbox {
			mutated++
		} else {
			untouched++
		}
	}
	if mutated < 3 || untouched != 1 {
		t.Errorf("full YAML of %d mutated sandbox pods and %d ordinary pods, want at least 3 and 1", mutated, untouched)
	}

	// The kubeconfig names the apiserver, which must be gone now.
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for name, cluster := range cfg.Clusters {
		u, err := url.Parse(cluster.Server)
		if err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		if conn, err := net.Dial("tcp", u.Host); err == nil {
			conn.Close()
			t.Errorf("the apiserver at %s still accepts connections after the demo stopped", u.Host)
		}
	}
}

// Without the control plane the demo says how to get it, and starts nothing.
func TestDemoWithoutControlPlane(t *testing.T) {
	tmp := t.TempDir()
	fake := filepath.Join(tmp, "sandbox-webhook")
	if err := os.WriteFile(fake, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(t.Context(), options{once: true, dir: filepath.Join(tmp, "demo"), webhook: fake, assets: filepath.Join(tmp, "empty")}, &out)
	if err == nil || !strings.Contains(err.Error(), "run make tools") {
		t.Fatalf("run = %v, want an error saying to run make tools", err)
	}
}
