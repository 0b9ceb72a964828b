package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// Case 3: non-sandbox pods, kube-system and the webhook's own namespace are
// untouched, while a sandbox pod next to them is mutated. kube-system and the
// own namespace carry the instance label, so the configuration's
// namespaceSelector alone would select them: only the chart's exclusions keep
// them out.
func TestScoping(t *testing.T) {
	in := newInstance(t, "scoping", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "scoping"}}},
	})
	ensureNamespace(t, "kube-system", map[string]string{instanceLabel: in.name})
	t.Cleanup(func() { removeNamespaceLabel(t, "kube-system", instanceLabel) })

	t.Run("sandbox pod is mutated", func(t *testing.T) {
		got := createPod(t, testkit.SandboxPod("scoping", "sandbox", sleeping))
		if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
			t.Errorf("stored sandbox pod %s:%s", fmtPod(got), joinProblems(p))
		}
	})
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"pod without the sandbox label", plainPod("scoping", "plain")},
		{"pod labelled app=sandbox-router", withLabels(plainPod("scoping", "router"), map[string]string{"app": "sandbox-router"})},
		{"sandbox pod in kube-system", testkit.SandboxPod("kube-system", "sandbox", sleeping)},
		{"sandbox pod in the webhook's own namespace", testkit.SandboxPod(in.ownNamespace, "sandbox", sleeping)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := createPod(t, tc.pod)
			if p := untouchedProblems(got); len(p) > 0 {
				t.Errorf("stored pod %s was changed:%s", fmtPod(got), joinProblems(p))
			}
		})
	}
}

func withLabels(pod *corev1.Pod, labels map[string]string) *corev1.Pod {
	pod.Labels = labels
	return pod
}

// removeNamespaceLabel runs in cleanups, after t.Context() is cancelled.
func removeNamespaceLabel(t *testing.T, name, key string) {
	ctx := context.Background()
	ns, err := suite.cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		delete(ns.Labels, key)
		_, err = suite.cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Errorf("removing label %s from namespace %s: %v", key, name, err)
	}
}

// Case 3, the webhook's own layer: a configuration that forgets to exclude
// kube-system and the webhook's namespace (a hand-written one, say) makes the
// apiserver send their pods; the server still leaves them untouched
// (kube-system always, its namespace through --exclude-namespace).
func TestScopingWithoutConfigExclusions(t *testing.T) {
	in := newInstance(t, "scoping-server", instanceOptions{})
	ensureNamespace(t, "kube-system", map[string]string{instanceLabel: in.name})
	t.Cleanup(func() { removeNamespaceLabel(t, "kube-system", instanceLabel) })

	mwc := in.mwc.DeepCopy()
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{instanceLabel: in.name}}
	}
	in.install(t, mwc)

	// Wait until the apiserver sends kube-system's pods: the server's
	// request counter moves for a dry-run create there.
	probe := testkit.SandboxPod("kube-system", "probe", sleeping)
	deadline := time.Now().Add(time.Minute)
	for {
		before := in.metric(t, "sandbox_webhook_admission_requests_total")
		got, err := suite.cs.CoreV1().Pods("kube-system").Create(t.Context(), probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run create in kube-system: %v", err)
		}
		if p := untouchedProblems(got); len(p) > 0 {
			t.Fatalf("dry-run pod in kube-system was changed:%s", joinProblems(p))
		}
		if in.metric(t, "sandbox_webhook_admission_requests_total") > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the apiserver never sent a kube-system pod to the webhook after the exclusions were removed")
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, ns := range []string{"kube-system", in.ownNamespace} {
		before := in.metric(t, "sandbox_webhook_admission_requests_total")
		got := createPod(t, testkit.SandboxPod(ns, "sandbox-unexcluded", sleeping))
		if p := untouchedProblems(got); len(p) > 0 {
			t.Errorf("stored pod %s was changed:%s", fmtPod(got), joinProblems(p))
		}
		if after := in.metric(t, "sandbox_webhook_admission_requests_total"); after <= before {
			t.Errorf("the pod in %s was not sent to the webhook (requests %v → %v), so this proves nothing", ns, before, after)
		}
	}
}

// TestMixedFleetMatchConditions: the narrow route for a mixed fleet, as
// docs/install.md gives it: an empty objectSelector and webhook.matchConditions
// that send pods with one label or another (app=sandbox, or agent-sandbox's
// sandbox-name-hash), with the fleet policy. Both kinds of sandbox pod are
// mutated through the API server; agent-sandbox's router (app=sandbox-router)
// is never sent, so it is created untouched, without even the status the
// guard's answers write.
func TestMixedFleetMatchConditions(t *testing.T) {
	const ns = "mixed-fleet"
	fleet, err := harness.ReadDir(filepath.Join(suite.root, "examples/policies/fleet"))
	if err != nil {
		t.Fatal(err)
	}
	newInstance(t, "mixed-fleet", instanceOptions{
		namespaces:     []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		policies:       fleet,
		objectSelector: &metav1.LabelSelector{},
		values: map[string]any{"webhook": map[string]any{
			"guard": map[string]any{"enabled": true},
			"matchConditions": []any{map[string]any{
				"name":       "sandbox-pods",
				"expression": "object.metadata.?labels[?'app'].orValue('') == 'sandbox' || 'agents.x-k8s.io/sandbox-name-hash' in object.metadata.?labels.orValue({})",
			}},
		}},
	})
	agent := plainPod(ns, "agent-sandbox")
	agent.Labels = map[string]string{"agents.x-k8s.io/sandbox-name-hash": "abc123"}
	for _, pod := range []*corev1.Pod{testkit.SandboxPod(ns, "harbor-style", sleeping), agent} {
		if p := seedProblems(createPod(t, pod), corev1.StorageMediumMemory); len(p) > 0 {
			t.Errorf("%s:%s", pod.Name, joinProblems(p))
		}
	}
	router := plainPod(ns, "router")
	router.Labels = map[string]string{"app": "sandbox-router"}
	if p := untouchedProblems(createPod(t, router)); len(p) > 0 {
		t.Errorf("the router was sent to the webhook:%s", joinProblems(p))
	}
}
