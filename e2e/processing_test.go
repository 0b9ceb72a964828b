package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// tinyContainersReview is an AdmissionReview of a pod CREATE whose pod has
// n containers of a few bytes each: the most work per request byte a client
// of the webhook port can ask for.
func tinyContainersReview(t *testing.T, ns string, n int) []byte {
	t.Helper()
	// Written by hand: the typed encoding adds "resources":{} to each.
	var raw bytes.Buffer
	fmt.Fprintf(&raw, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"tiny","namespace":%q,"labels":{"app":"sandbox"}},"spec":{"containers":[`, ns)
	for i := range n {
		if i > 0 {
			raw.WriteByte(',')
		}
		fmt.Fprintf(&raw, `{"name":"c%05d","image":"busybox:1.3"}`, i)
	}
	raw.WriteString(`]}}`)
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0b7c3a1e-0000-4000-8000-000000075000",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw.Bytes()},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestProcessingMemoryHeld sends the review a red-team pass used against
// serve, 75,000 tiny containers in 2.99 MB, straight to the webhook's port
// from as many clients at once as the default request budget admits bodies
// of that size (three quarters of --max-buffered-bytes, 32Mi, for bodies
// above 64 KiB: 8), each sending it again as soon as it is answered; then
// the costliest pod within the caps, MaxContainers tiny containers in 40 KB,
// from as many clients as --max-in-flight admits (256). While they do, pods
// of the golden corpus created through the real API server must be admitted
// and mutated, and the process's peak RSS (VmHWM) must stay below the
// chart's memory limit. The first review must be refused, undecoded, in
// the review (code 413), with what it holds.
func TestProcessingMemoryHeld(t *testing.T) {
	const ns = "processing"
	in := newInstance(t, "processing", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	pid := in.webhook.PID()
	before := procMemory(t, pid)
	t.Logf("before: VmRSS %d MiB, VmHWM %d MiB", before.rss>>20, before.hwm>>20)

	const maxBuffered = 32 << 20 // serve's default --max-buffered-bytes
	huge := tinyContainersReview(t, ns, 75000)
	answers := holdLoad(t, in, ns, huge, (maxBuffered-maxBuffered/4)/len(huge))
	for a := range answers {
		if !strings.Contains(a, "allowed=false patch=0KiB code=413 sandbox-webhook: processing this AdmissionReview") {
			t.Errorf("the 75,000-container review was answered %s, want refused in the review (code 413) with what it holds", a)
		}
	}
	atCap := tinyContainersReview(t, ns, 1000)
	holdLoad(t, in, ns, atCap, 256)
}

// holdLoad sends body from clients at once, each again as soon as it is
// answered, while it creates corpus pods through the API server, and checks
// that they are mutated and that the webhook's peak RSS stays below the
// chart's memory limit. It returns how the body was answered.
func holdLoad(t *testing.T, in *instance, ns string, body []byte, clients int) map[string]int {
	t.Helper()
	pid := in.webhook.PID()
	client := attackClient(clients)
	defer client.CloseIdleConnections()
	ctx, stop := context.WithTimeout(t.Context(), 2*time.Minute)
	defer stop()
	var (
		wg      sync.WaitGroup
		sent    atomic.Int64
		mu      sync.Mutex
		answers = map[string]int{}
	)
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				answer, ok := postReview(ctx, client, in.webhook.URL(), body)
				if !ok {
					continue
				}
				sent.Add(1)
				mu.Lock()
				answers[answer]++
				mu.Unlock()
			}
		})
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	// Wait for the first answers, then admit corpus pods while the
	// clients keep sending.
	testkit.WaitFor(t, "the first answers", time.Minute, func() error {
		if sent.Load() < int64(clients) {
			return fmt.Errorf("%d answered", sent.Load())
		}
		return nil
	})
	admitted := 0
	for round := range 3 {
		for _, name := range []string{"basic", "init-and-sidecar", "many-containers", "limit-above-headroom", "uv-link-mode-set", "memory-emptydirs", "generate-name"} {
			pod := corpusPod(t, name)
			pod.Namespace = ns
			if pod.Name != "" {
				pod.Name = fmt.Sprintf("%s-%d-%d", pod.Name, clients, round)
			}
			got := createPod(t, pod)
			if !harness.Mutated(got) {
				t.Errorf("corpus pod %s was admitted unmutated under load", name)
			}
			admitted++
		}
		if !in.webhook.Running() {
			t.Fatal("the webhook process died under load")
		}
	}
	stop()
	wg.Wait()
	after := procMemory(t, pid)
	mu.Lock()
	defer mu.Unlock()
	var lines []string
	for a, n := range answers {
		lines = append(lines, fmt.Sprintf("%6d × %s", n, a))
	}
	sort.Strings(lines)
	t.Logf("%d clients sending %d bytes: %d answered, %d corpus pods admitted; VmRSS %d MiB, peak VmHWM %d MiB; answers:\n%s",
		clients, len(body), sent.Load(), admitted, after.rss>>20, after.hwm>>20, strings.Join(lines, "\n"))
	if after.hwm >= chartMemoryLimit {
		t.Errorf("peak RSS %d MiB reached the chart's memory limit of %d MiB", after.hwm>>20, chartMemoryLimit>>20)
	}
	return answers
}

// corpusPod reads testdata/pods/name.yaml.
func corpusPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(suite.root, "testdata", "pods", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(raw, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
