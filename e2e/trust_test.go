package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestFourthRoundAttacksHeld: what a pod author writes, through the real
// API server, against the webhook as the chart registers it with its
// default webhook.guard (two fail-open entries and the
// ValidatingAdmissionPolicy), each pod carrying a forged status annotation
// that satisfies the guard:
//   - a memory limit of 1e10000000, whose comparison with 8Gi would hold a
//     core for minutes: refused at once by the webhook, naming the field,
//     and the replica serves the next pod;
//   - a container with 200,000 arguments, more than the webhook processes:
//     refused in the review (413), not left to the failure policy, so it
//     is not admitted unmutated;
//   - 700 env entries (22 KB, with the managedFields the API server adds):
//     an ordinary pod under the documented caps, mutated; so are 1,000 env
//     entries and 400 containers, what docs/serve.md states the default
//     budget answers through the API server, and 5,000 env entries are
//     refused by the webhook itself.
func TestFourthRoundAttacksHeld(t *testing.T) {
	const ns = "trust"
	newInstance(t, "trust", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		values:     map[string]any{"webhook": map[string]any{"guard": map[string]any{"enabled": true}}},
	})
	forged := func(pod *corev1.Pod) *corev1.Pod {
		pod.Annotations = map[string]string{mutate.StatusAnnotation: `{"policies":[]}`}
		return pod
	}

	huge := forged(testkit.SandboxPod(ns, "huge-quantity", sleeping))
	huge.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1e10000000")}
	start := time.Now()
	_, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), huge, metav1.CreateOptions{})
	took := time.Since(start)
	if err == nil {
		t.Error("a pod with a memory limit of 1e10000000 was admitted")
	} else if want := "spec.containers[0].resources.limits[memory] is a quantity beyond what any node holds"; !strings.Contains(err.Error(), want) {
		t.Errorf("the refusal %q does not say %q", err, want)
	}
	t.Logf("1e10000000: refused in %v", took.Round(time.Millisecond))

	args := forged(testkit.SandboxPod(ns, "many-args", sleeping))
	args.Spec.Containers[0].Args = make([]string, 200_000)
	for i := range args.Spec.Containers[0].Args {
		args.Spec.Containers[0].Args[i] = "x"
	}
	_, err = suite.cs.CoreV1().Pods(ns).Create(t.Context(), args, metav1.CreateOptions{})
	if err == nil {
		t.Error("a pod with 200,000 arguments and a forged status was admitted")
	} else if !strings.Contains(err.Error(), "--max-buffered-bytes") {
		t.Errorf("the refusal %q is not the webhook's (the guard's would mean it failed open)", err)
	}

	withEnv := func(name string, n int) *corev1.Pod {
		pod := forged(testkit.SandboxPod(ns, name, sleeping))
		for i := range n {
			pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("E%d", i), Value: "v"})
		}
		return pod
	}
	got := createPod(t, withEnv("many-env", 700))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("a pod with 700 env entries:%s", joinProblems(p))
	}

	// What docs/serve.md states is answered through the API server with
	// the default budget: 1,000 env entries in a container, 400
	// containers; beyond the budget, the webhook refuses the pod itself.
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	many := testkit.SandboxPod(ns, "many-containers", sleeping)
	c := many.Spec.Containers[0]
	many.Spec.Containers = nil
	for i := range 400 {
		c.Name = fmt.Sprintf("c%d", i)
		many.Spec.Containers = append(many.Spec.Containers, c)
	}
	for _, pod := range []*corev1.Pod{withEnv("env-1000", 1000), many} {
		got, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), pod, dry)
		if err != nil {
			t.Errorf("%s: %v", pod.Name, err)
		} else if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
			t.Errorf("%s:%s", pod.Name, joinProblems(p))
		}
	}
	_, err = suite.cs.CoreV1().Pods(ns).Create(t.Context(), withEnv("env-5000", 5000), dry)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "pods.sandbox-webhook.io" denied the request`) || !strings.Contains(err.Error(), "--max-buffered-bytes") {
		t.Errorf("a pod with 5,000 env entries: %v, want the webhook's refusal", err)
	}

	// The replica that refused the quantity serves the next pod at once.
	got = createPod(t, testkit.SandboxPod(ns, "after", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("after the attacks:%s", joinProblems(p))
	}
}

// TestMAPBoundsQuantities: the exported MutatingAdmissionPolicy, in the API
// server's own process, refuses a pod whose pod-level memory limit is
// 1e10000000 and which brings a status annotation naming 8Gi, whose
// comparison by the API server's quantity() would hold its core, and still
// mutates the same pod without it. On 1.36 and later (MAP v1).
func TestMAPBoundsQuantities(t *testing.T) {
	if version.MustParseGeneric(suite.version).Minor() < 36 {
		t.Skipf("kube-apiserver %s has no MutatingAdmissionPolicy v1", suite.version)
	}
	const ns = "map-bound"
	ensureNamespace(t, ns, map[string]string{mapLabel: "bound"})
	exported, _ := exportSet(t, golden.Sets[0])
	installMAP(t, exported, "bound", testkit.SandboxPod(ns, "probe", sleeping))

	pod := testkit.SandboxPod(ns, "huge-pod-limit", sleeping)
	pod.Annotations = map[string]string{mutate.StatusAnnotation: `{"policies":[],"podMemory":{"limit":"8Gi"}}`}
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1e10000000")}}
	start := time.Now()
	_, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "a memory quantity of the pod or of its status annotation is beyond what any node holds") {
		t.Errorf("a pod-level limit of 1e10000000 through the exported MAP: %v, want the MAP's refusal", err)
	}
	t.Logf("refused in %v", time.Since(start).Round(time.Millisecond))
	// For comparison: the API server's own handling of the same pod, in a
	// namespace no policy selects (a dry run).
	ensureNamespace(t, ns+"-none", nil)
	other := pod.DeepCopy()
	other.Namespace = ns + "-none"
	start = time.Now()
	_, err = suite.cs.CoreV1().Pods(other.Namespace).Create(t.Context(), other, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	t.Logf("without the MAP: %v in %v", err, time.Since(start).Round(time.Millisecond))
	got := createPod(t, testkit.SandboxPod(ns, "plain", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("a sandbox pod through the exported MAP:%s", joinProblems(p))
	}
}
