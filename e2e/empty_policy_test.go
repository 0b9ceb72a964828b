package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// markerPolicy is a second policy, in a plain directory beside the mounted
// ConfigMap, whose env var tells that it is serving.
const markerPolicy = `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: truncation-marker
spec:
  match:
    podSelector:
      matchLabels:
        app: sandbox
  env:
  - name: TRUNCATION_MARKER
    value: serving
`

// TestTruncatedPolicyKeepsLastGoodSet truncates policy files under a real
// serve while pods are created through the apiserver: a file truncated in
// place, then half rewritten, and a ConfigMap key emptied. An empty or half
// written file is an invalid set, so every pod created meanwhile gets both
// policies, the server stays ready, and each rejection is counted and shown.
func TestTruncatedPolicyKeepsLastGoodSet(t *testing.T) {
	const ns = "truncation"
	plain := t.TempDir()
	marker := filepath.Join(plain, "marker.yaml")
	if err := os.WriteFile(marker, []byte(markerPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, "truncation", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		args:       []string{"--policy", plain},
	})
	seed := in.policies // examples/policies/memory, as a ConfigMap
	seedFiles := map[string][]byte{}
	raw, err := os.ReadFile(filepath.Join(seed.Dir, "sandbox-seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	seedFiles["sandbox-seed.yaml"] = raw

	// Pods created all along, each checked for both policies.
	var (
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		answers  atomic.Int64
		mu       sync.Mutex
		problems []string
	)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pod := testkit.SandboxPod(ns, fmt.Sprintf("load-%d-%d", w, i), sleeping)
				got, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				var p string
				switch {
				case err != nil:
					p = err.Error()
				case volumeAt(got, got.Spec.Containers[0], uvMountPath) == nil:
					p = "no uv cache: the seed policy did not serve"
				case !hasEnv(got.Spec.Containers[0], "TRUNCATION_MARKER"):
					p = "no TRUNCATION_MARKER: the marker policy did not serve"
				}
				answers.Add(1)
				if p != "" {
					mu.Lock()
					problems = append(problems, p)
					mu.Unlock()
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()

	rejected := func(what string, change func() error) {
		t.Helper()
		before := in.metric(t, "sandbox_webhook_policy_reload_errors_total")
		if err := change(); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the webhook to reject "+what, time.Minute, func() error {
			if n := in.metric(t, "sandbox_webhook_policy_reload_errors_total"); n <= before {
				return fmt.Errorf("sandbox_webhook_policy_reload_errors_total %v", n)
			}
			return nil
		})
		if code, body, err := in.webhook.Readyz(t.Context()); err != nil || code != 200 {
			t.Errorf("/readyz after %s: %d %q %v; the last good set serves, so it should stay ready", what, code, body, err)
		}
	}
	rejected("a policy file truncated in place", func() error { return os.Truncate(marker, 0) })
	status := policyErrors(t, in)
	if !strings.Contains(status, marker+": holds no policy document") {
		t.Errorf("/status policies.errors do not name the empty %s:\n%s", marker, status)
	}
	rejected("a half-written policy file", func() error {
		return os.WriteFile(marker, []byte(markerPolicy[:len(markerPolicy)/2]), 0o644)
	})
	rejected("an emptied ConfigMap key", func() error {
		if err := os.WriteFile(marker, []byte(markerPolicy), 0o644); err != nil {
			return err
		}
		return seed.Update(map[string][]byte{"sandbox-seed.yaml": nil})
	})

	// Both restored: the errors clear, and the set is the one that served.
	if err := seed.Update(seedFiles); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the restored set to load", time.Minute, func() error {
		if s := policyErrors(t, in); s != "" {
			return errors.New(s)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	t.Logf("%d pods created during the truncations, %d without both policies", answers.Load(), len(problems))
	if answers.Load() == 0 {
		t.Fatal("no pod was created during the truncations")
	}
	if len(problems) > 0 {
		t.Errorf("%d of %d pods did not get the last good set; first: %s", len(problems), answers.Load(), problems[0])
	}
}

// policyErrors is /status's policies.errors, one per line.
func policyErrors(t *testing.T, in *instance) string {
	t.Helper()
	raw, err := in.webhook.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var status struct{ Policies struct{ Errors []string } }
	if err := json.Unmarshal([]byte(raw), &status); err != nil {
		t.Fatalf("/status: %v\n%s", err, raw)
	}
	return strings.Join(status.Policies.Errors, "\n")
}

func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
