package check

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// withEphemeral adds the chart's second webhook to configs: UPDATE of
// pods/ephemeralcontainers, no objectSelector.
func withEphemeral(configs []admissionregistrationv1.MutatingWebhookConfiguration) []admissionregistrationv1.MutatingWebhookConfiguration {
	c := &configs[0]
	c.Webhooks = append(c.Webhooks, admissionregistrationv1.MutatingWebhook{
		Name: "ephemeralcontainers.sandbox-webhook.io",
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/ephemeralcontainers"}},
		}},
		NamespaceSelector: c.Webhooks[0].NamespaceSelector,
	})
	return configs
}

func config(mutateWebhook func(*admissionregistrationv1.MutatingWebhook)) []admissionregistrationv1.MutatingWebhookConfiguration {
	w := admissionregistrationv1.MutatingWebhook{
		Name: "pods.sandbox-webhook.io",
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}},
		ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}},
	}
	if mutateWebhook != nil {
		mutateWebhook(&w)
	}
	return []admissionregistrationv1.MutatingWebhookConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: "sw"}, Webhooks: []admissionregistrationv1.MutatingWebhook{w}}}
}

func TestSelect(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rl", Labels: map[string]string{"kubernetes.io/metadata.name": "rl"}}}
	sandbox := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}}}
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "x"}}}
	ignore := admissionregistrationv1.Ignore
	for _, c := range []struct {
		name   string
		edit   func(*admissionregistrationv1.MutatingWebhook)
		pod    *corev1.Pod
		ns     *corev1.Namespace
		reason string
		byName bool
	}{
		{name: "sends", pod: sandbox, ns: ns},
		{name: "objectSelector", pod: agent, ns: ns, reason: "the pod's labels do not match the objectSelector (app=sandbox)"},
		{name: "excluded by name", pod: sandbox, ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}},
			reason: "the namespaceSelector excludes namespace kube-system by name (kubernetes.io/metadata.name notin (kube-system))", byName: true},
		{name: "namespaceSelector", pod: sandbox, ns: ns, edit: func(w *admissionregistrationv1.MutatingWebhook) {
			w.NamespaceSelector.MatchLabels = map[string]string{"sandboxes": "true"}
		}, reason: "namespace rl's labels do not match the namespaceSelector (kubernetes.io/metadata.name notin (kube-system),sandboxes=true)"},
		{name: "namespaceSelector and name", pod: sandbox, ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}}, edit: func(w *admissionregistrationv1.MutatingWebhook) {
			w.NamespaceSelector.MatchLabels = map[string]string{"sandboxes": "true"}
		}, reason: "namespace kube-system's labels do not match the namespaceSelector (kubernetes.io/metadata.name notin (kube-system),sandboxes=true)"},
		{name: "UPDATE only", pod: sandbox, ns: ns, edit: func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
		}, reason: "no rule covers CREATE of v1 pods"},
		{name: "wildcards", pod: agent, ns: ns, edit: func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
			w.Rules[0].Rule = admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}}
			w.ObjectSelector = nil
			w.FailurePolicy = &ignore
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Select(config(c.edit), c.pod, c.ns, nil)
			if len(got) != 1 || got[0].Reason != c.reason || got[0].Sends != (c.reason == "") || (got[0].Reason != "") != (got[0].Fix != "") || got[0].ExcludedByName != c.byName {
				t.Errorf("got %+v, want reason %q, excluded by name %v", got, c.reason, c.byName)
			}
			// The ephemeral-container webhook is not one that could send
			// the CREATE: it is left out.
			if again := Select(withEphemeral(config(c.edit)), c.pod, c.ns, nil); !cmp.Equal(again, got) {
				t.Errorf("with the ephemeral-container webhook: %+v, want %+v", again, got)
			}
		})
	}
}

func TestDrift(t *testing.T) {
	set, err := policy.ParseSet("t.yaml", []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: seed}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: uv-cache, mountPath: /root/.cache/uv}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ns := mutate.Namespace{Name: "rl"}
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	mutated := mutate.Pod(fresh, ns, set, mutate.Options{}).Pod
	hash := set.Policies[0].Hash
	byOther := mutated.DeepCopy()
	byOther.Annotations = nil
	older := mutated.DeepCopy()
	older.Annotations[mutate.StatusAnnotation] = strings.Replace(older.Annotations[mutate.StatusAnnotation], hash, "0123456789ab", 1)
	for _, c := range []struct {
		name          string
		pod           *corev1.Pod
		opts          mutate.Options
		sent          bool
		failurePolicy string
		want          []string
	}{
		{name: "up to date", pod: mutated, sent: true, failurePolicy: "Fail"},
		{name: "not a sandbox", pod: &corev1.Pod{}, sent: false},
		{name: "webhook down under Ignore", pod: fresh, sent: true, failurePolicy: "Ignore", want: []string{
			"the pod was not mutated, but the current policies select it (seed): it was created while the webhook did not answer (failurePolicy Ignore), or before the policy or the webhook existed; recreate it"}},
		{name: "not sent", pod: fresh, sent: false, want: []string{
			"the pod was not mutated, but the current policies select it (seed): the webhook configuration does not send it"}},
		{name: "mutated by another", pod: byOther, sent: true, failurePolicy: "Fail", want: []string{
			"the pod has what the current policies (seed) inject, but sandbox-webhook did not put it there (no sandbox-webhook.io/status annotation): another mutator did, such as a Kyverno policy, which records nothing on the pod"}},
		{name: "older hash", pod: older, sent: true, want: []string{
			"policy seed: created under an older version (hash 0123456789ab; now " + hash + "); recreate the pod to get the current injection"}},
		{name: "other mode", pod: mutated, sent: true, opts: mutate.Options{LeakMitigation: mutate.LeakMitigationOn}, want: []string{
			"policy seed: mutated in memory mode, but now runs in disk mode (leak mitigation changed since); recreate the pod to switch"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := mutate.Pod(c.pod, ns, set, c.opts)
			got, err := Drift(c.pod, res, c.sent, c.failurePolicy)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("drift (-want +got):\n%s", d)
			}
		})
	}
}

func TestReachable(t *testing.T) {
	set, err := policy.ParseSet("t.yaml", []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: a-harbor}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  env: [{name: UV_LINK_MODE, value: copy}]
---
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: b-fleet}
spec:
  match:
    any:
    - podSelector: {matchLabels: {app: sandbox}}
    - podSelector: {matchExpressions: [{key: agents.x-k8s.io/sandbox-name-hash, operator: Exists}]}
  env: [{name: UV_LINK_MODE, value: copy}]
---
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: b-namespaces}
spec:
  match: {namespaces: [r2e-1]}
  env: [{name: UV_LINK_MODE, value: copy}]
---
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: c-system}
spec:
  match: {namespaces: [kube-system], podSelector: {matchLabels: {app: sandbox}}}
  env: [{name: UV_LINK_MODE, value: copy}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range Reachable(set, config(nil)) {
		got = append(got, u.Policy+" "+u.Block+": "+u.Reason)
	}
	want := []string{
		"b-fleet match.any[1]: the pods it selects (labels agents.x-k8s.io/sandbox-name-hash=x) are never sent to the webhook: sw/pods.sandbox-webhook.io: its objectSelector (app=sandbox) does not select them",
		"c-system match: the pods it selects (labels app=sandbox) are never sent to the webhook: sw/pods.sandbox-webhook.io: its namespaceSelector (kubernetes.io/metadata.name notin (kube-system)) does not select them",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("unreachable (-want +got):\n%s", d)
	}
	// The chart's ephemeral-container webhook has no objectSelector, but
	// it never sends a CREATE: it reaches nothing.
	got = nil
	for _, u := range Reachable(set, withEphemeral(config(nil))) {
		got = append(got, u.Policy+" "+u.Block+": "+u.Reason)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("with the ephemeral-container webhook, unreachable (-want +got):\n%s", d)
	}
	// Without an objectSelector, every pod selection is sent.
	all := config(func(w *admissionregistrationv1.MutatingWebhook) { w.ObjectSelector = nil })
	if u := Reachable(set, all); len(u) != 1 || u[0].Policy != "c-system" {
		t.Errorf("without objectSelector: %+v", u)
	}
}
