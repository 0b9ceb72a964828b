package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestGuard: the chart's webhook.guard (on by default) against the
// apiserver, the server run with --status-always as the chart's Deployment
// runs it. Its two pods
// entries each fail open and its ValidatingAdmissionPolicy refuses a
// selected pod neither answered. With the webhook up, a sandbox pod is
// mutated with one call (the second entry is not called), and a selected
// pod no policy changes is admitted with the empty status; with the first
// entry failing, the second mutates the pod; with the webhook down, a
// sandbox pod is refused by the guard, never admitted unmutated, while a
// pod the configuration does not select is created.
func TestGuard(t *testing.T) {
	const ns = "guard"
	in := newInstance(t, "guard", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		values:     map[string]any{"webhook": map[string]any{"guard": map[string]any{"enabled": true}}},
	})
	if n := len(in.mwc.Webhooks); n != 3 || in.mwc.Webhooks[1].Name != "pods-retry.sandbox-webhook.io" {
		t.Fatalf("the guard's configuration has %d entries, want pods, pods-retry and ephemeralcontainers", n)
	}

	before := in.metric(t, "sandbox_webhook_admission_requests_total")
	got := createPod(t, testkit.SandboxPod(ns, "answered", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("with the webhook up:%s", joinProblems(p))
	}
	if calls := in.metric(t, "sandbox_webhook_admission_requests_total") - before; calls != 1 {
		t.Errorf("one sandbox pod made %v admission requests, want 1 (the retry entry is called only when the first did not answer)", calls)
	}

	optedOut := testkit.SandboxPod(ns, "opted-out", sleeping)
	optedOut.Labels["sandbox-webhook.io/skip"] = "true"
	windows := testkit.SandboxPod(ns, "windows", sleeping)
	windows.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	for _, pod := range []*corev1.Pod{optedOut, windows} {
		got = createPod(t, pod)
		if s := got.Annotations[mutate.StatusAnnotation]; s != `{"policies":[]}` {
			t.Errorf("%s, selected, no policy changes it: status %q, want the empty one", pod.Name, s)
		}
		delete(got.Annotations, mutate.StatusAnnotation)
		if p := untouchedProblems(got); len(p) > 0 {
			t.Errorf("%s, selected, no policy changes it:%s", pod.Name, joinProblems(p))
		}
	}

	// The first entry meets a path the server does not serve (404: a failed
	// call, ignored); the second answers. The apiserver counts the first
	// entry's fail-open.
	// The counter's series appears with the entry's first fail-open.
	failOpen := func() float64 {
		n, err := testkit.Metric(apiserverMetrics(t), "apiserver_admission_webhook_fail_open_count", "name=pods.sandbox-webhook.io")
		if errors.Is(err, testkit.ErrNoSeries) {
			return 0
		} else if err != nil {
			t.Fatal(err)
		}
		return n
	}
	broken := in.mwc.DeepCopy()
	broken.Webhooks[0].ClientConfig.URL = new(strings.Replace(*broken.Webhooks[0].ClientConfig.URL, "/mutate-v1-pod", "/nowhere", 1))
	in.install(t, broken)
	opened := failOpen()
	testkit.WaitFor(t, "the apiserver to call the changed first entry", time.Minute, func() error {
		_, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), testkit.SandboxPod(ns, "dry", sleeping), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if now := failOpen(); err != nil || now <= opened {
			return fmt.Errorf("fail-opens %v, create %w", now, err)
		}
		return nil
	})
	opened = failOpen()
	got = createPod(t, testkit.SandboxPod(ns, "retried", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("answered by the second entry:%s", joinProblems(p))
	}
	// Twice: the second entry changed the pod, so the apiserver reinvokes
	// the first (reinvocationPolicy IfNeeded), which fails open again; the
	// second is not called again, the pod having the status annotation.
	if n := failOpen() - opened; n != 2 {
		t.Errorf("the first entry failed open %v times for one pod, want 2 (its call and its reinvocation)", n)
	}
	in.install(t, in.mwc)

	forgedWhileDown(t, in, ns)
	webhookDown(t, in, ns, "ValidatingAdmissionPolicy", "guard-sandbox-webhook-guard", "no replica of the sandbox-webhook",
		"kubectl delete mutatingwebhookconfiguration "+in.mwc.Name)
	breakGlass(t, in, ns)
}

// breakGlass: with no replica answering, the guard refuses sandbox pods;
// deleting the webhook configuration, the break-glass the refusal names
// (and what `helm uninstall` deletes first), switches the guard off with
// it. Under a stream of creates, every one that starts before the deletion
// is refused and none that starts after it returns (one in flight across
// it may meet either side).
func breakGlass(t *testing.T, in *instance, ns string) {
	t.Helper()
	if err := in.webhook.Stop(); err != nil {
		t.Fatalf("stopping the webhook: %v", err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), testkit.SandboxPod(ns, "down", sleeping), dry); err == nil {
		t.Fatal("a sandbox pod was admitted with the webhook down and its configuration in place")
	}
	s := createStream(t, ns, func() {
		if err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(t.Context(), in.mwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	refusedBefore, before, _ := s.tally(func(c streamed) bool { return c.phase == beforeChange })
	refusedAfter, after, firstErr := s.tally(func(c streamed) bool { return c.phase == afterChange })
	t.Logf("break-glass: %d of %d creates refused before the configuration was deleted, %d of %d after", refusedBefore, before, refusedAfter, after)
	if refusedBefore != before || before == 0 {
		t.Errorf("with the webhook down, %d of %d creates were refused, want all", refusedBefore, before)
	}
	if refusedAfter > 0 || after == 0 {
		t.Errorf("after the webhook configuration was deleted, %d of %d creates were refused, want none; the first: %v", refusedAfter, after, firstErr)
	}

	in.install(t, in.mwc)
	if err := in.webhook.Start(t.Context()); err != nil {
		t.Fatalf("restarting the webhook: %v", err)
	}
	if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(ns, "probe", sleeping), true); err != nil {
		t.Fatal(err)
	}
}

// forgedWhileDown creates, with no replica answering, a sandbox pod that
// brings a status annotation of its own. From Kubernetes 1.36 the guard's
// MutatingAdmissionPolicy removes it before the webhook is called, so the
// guard refuses the pod as it refuses any pod no call answered; before 1.36
// the forged annotation satisfies the guard and the pod is admitted
// unmutated, as docs/cluster.md says.
func forgedWhileDown(t *testing.T, in *instance, ns string) {
	t.Helper()
	if err := in.webhook.Stop(); err != nil {
		t.Fatalf("stopping the webhook: %v", err)
	}
	pod := testkit.SandboxPod(ns, "forged-while-down", sleeping)
	pod.Annotations = map[string]string{mutate.StatusAnnotation: `{"policies":[]}`}
	_, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if minor := version.MustParseGeneric(suite.version).Minor(); minor >= 36 {
		if err == nil || !strings.Contains(err.Error(), "no replica of the sandbox-webhook") {
			t.Errorf("kube-apiserver 1.%d: a pod with a forged status annotation, no replica answering: %v, want the guard's refusal", minor, err)
		}
	} else if err != nil {
		t.Errorf("kube-apiserver 1.%d (no MutatingAdmissionPolicy v1): a pod with a forged status annotation was refused (%v); docs/cluster.md says it passes the guard there", minor, err)
	}
	if err := in.webhook.Start(t.Context()); err != nil {
		t.Fatalf("restarting the webhook: %v", err)
	}
	if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(ns, "probe", sleeping), true); err != nil {
		t.Fatal(err)
	}
	// With a replica answering, the same pod is mutated.
	got := createPod(t, pod)
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("a pod with a forged status annotation, the webhook up:%s", joinProblems(p))
	}
}
