package e2e

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// Case 7: with the webhook process stopped and webhook.guard off,
// failurePolicy Fail (the chart's default) rejects sandbox pods with an
// error that names the webhook, while pods the configuration does not
// select are still created; once the process is back, sandbox pods are
// created and mutated again. With the guard (TestGuard) the refusal is the
// guard's.
func TestWebhookDown(t *testing.T) {
	const ns = "webhookdown"
	in := newInstance(t, "webhookdown", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		values:     map[string]any{"webhook": map[string]any{"guard": map[string]any{"enabled": false}}},
	})
	if got := in.mwc.Webhooks[0].FailurePolicy; got == nil || *got != admissionregistrationv1.Fail {
		t.Fatalf("the chart's default failurePolicy is %v, want Fail", got)
	}

	webhookDown(t, in, ns, "failed calling webhook", in.mwc.Webhooks[0].Name, "connection refused")
}

// webhookDown stops in's webhook: a sandbox pod is refused with an error
// that says each of want, and a pod the configuration does not select is
// created unchanged; once the webhook is back, sandbox pods are mutated.
func webhookDown(t *testing.T, in *instance, ns string, want ...string) {
	t.Helper()
	if err := in.webhook.Stop(); err != nil {
		t.Fatalf("stopping the webhook: %v", err)
	}

	_, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), testkit.SandboxPod(ns, "while-down", sleeping), metav1.CreateOptions{})
	if err == nil {
		t.Fatal("a sandbox pod was created while the webhook was down")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the rejection %q does not say %q", err, w)
		}
	}

	got := createPod(t, plainPod(ns, "plain-while-down"))
	if p := untouchedProblems(got); len(p) > 0 {
		t.Errorf("non-sandbox pod:%s", joinProblems(p))
	}

	if err := in.webhook.Start(t.Context()); err != nil {
		t.Fatalf("restarting the webhook: %v", err)
	}
	if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(ns, "probe", sleeping), true); err != nil {
		t.Fatal(err)
	}
	got = createPod(t, testkit.SandboxPod(ns, "after-restart", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("after the restart:%s", joinProblems(p))
	}
}
