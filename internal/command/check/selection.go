package check

// What check asks of the objects it reads from the cluster, purely: whether
// a webhook configuration sends the pod to the webhook at all (Select), and
// whether a pod's recorded mutation still matches what the current
// policies do (Drift).

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// Selection is what one webhook of a configuration does with the pod.
type Selection struct {
	// Configuration and Webhook name the webhook.
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook"`
	// Sends is true when the apiserver sends the pod's CREATE to the
	// webhook, as far as the selectors and rules decide.
	Sends bool `json:"sends"`
	// Reason says why not, naming the selector; Fix says what to change.
	Reason string `json:"reason,omitempty"`
	Fix    string `json:"fix,omitempty"`
	// MatchConditions are the webhook's CEL match conditions ("name:
	// expression"); MatchConditionsNote says whether they were evaluated
	// and hold.
	MatchConditions     []string `json:"matchConditions,omitempty"`
	MatchConditionsNote string   `json:"matchConditionsNote,omitempty"`
	// FailurePolicy is the webhook's failurePolicy (Fail when unset).
	FailurePolicy string `json:"failurePolicy"`
	// ExcludedByName is true when the only thing that stops the pod is the
	// namespaceSelector naming its namespace (kubernetes.io/metadata.name
	// NotIn, as the chart excludes kube-system, its own namespace and
	// webhook.excludeNamespaces): left out by design, nothing to fix.
	ExcludedByName bool `json:"excludedByName,omitempty"`
}

// Select evaluates every webhook of the configurations for a pod CREATE in
// namespace ns, as the apiserver does: rules, namespaceSelector,
// objectSelector, then the matchConditions of a webhook that sends the pod
// with match, when not nil (whether they all hold, else the name of one that
// is false). A webhook whose rules name only subresources (the chart's
// ephemeral-container check) is left out: it is not meant to see a CREATE.
func Select(configs []admissionregistrationv1.MutatingWebhookConfiguration, pod *corev1.Pod, ns *corev1.Namespace,
	match func(*admissionregistrationv1.MutatingWebhook) (ok bool, failed string, err error)) []Selection {
	var out []Selection
	for _, c := range configs {
		for _, w := range c.Webhooks {
			if SubresourcesOnly(&w) {
				continue
			}
			s := Selection{Configuration: c.Name, Webhook: w.Name, FailurePolicy: FailurePolicy(&w)}
			for _, mc := range w.MatchConditions {
				s.MatchConditions = append(s.MatchConditions, mc.Name+": "+mc.Expression)
			}
			s.Reason, s.Fix, s.ExcludedByName = selects(&w, pod, ns)
			s.Sends = s.Reason == ""
			if s.Sends && len(w.MatchConditions) > 0 && match != nil {
				switch ok, failed, err := match(&w); {
				case err != nil:
					s.MatchConditionsNote = "not evaluated: " + err.Error()
				case !ok:
					s.Sends = false
					s.Reason = fmt.Sprintf("matchCondition %q is false for the pod", failed)
					s.Fix = "change the webhook's matchConditions (webhook.matchConditions) or the pod"
				default:
					s.MatchConditionsNote = "all hold for the pod"
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// FailurePolicy is the webhook's failurePolicy, Fail (the apiserver's
// default) when unset.
func FailurePolicy(w *admissionregistrationv1.MutatingWebhook) string {
	return string(ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail))
}

// selects returns why the webhook does not receive the pod's CREATE and the
// fix, or "" when it does.
func selects(w *admissionregistrationv1.MutatingWebhook, pod *corev1.Pod, ns *corev1.Namespace) (reason, fix string, byName bool) {
	if !slices.ContainsFunc(w.Rules, podCreateRule) {
		return "no rule covers CREATE of v1 pods", "add a rule {operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}", false
	}
	if w.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil {
			return fmt.Sprintf("invalid namespaceSelector: %v", err), "fix the configuration's namespaceSelector", false
		}
		if !sel.Matches(labels.Set(ns.Labels)) {
			if excludedByName(sel, ns) {
				return fmt.Sprintf("the namespaceSelector excludes namespace %s by name (%s)", ns.Name, sel),
					"none: the configuration leaves this namespace out on purpose (the chart: kube-system, its own namespace and webhook.excludeNamespaces)", true
			}
			return fmt.Sprintf("namespace %s's labels do not match the namespaceSelector (%s)", ns.Name, sel),
				fmt.Sprintf("label namespace %s to match the selector, or widen webhook.namespaceSelector", ns.Name), false
		}
	}
	if w.ObjectSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.ObjectSelector)
		if err != nil {
			return fmt.Sprintf("invalid objectSelector: %v", err), "fix the configuration's objectSelector", false
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			return fmt.Sprintf("the pod's labels do not match the objectSelector (%s)", sel),
				"label the pod's template to match the objectSelector, or set webhook.objectSelector to select these pods (docs/install.md#which-pods-are-mutated-opting-in)", false
		}
	}
	return "", "", false
}

// excludedByName reports whether the requirements sel fails for ns are all
// on kubernetes.io/metadata.name, a label the apiserver sets to the
// namespace's name and no one can change: the namespace is excluded by
// name, not for want of a label.
func excludedByName(sel labels.Selector, ns *corev1.Namespace) bool {
	reqs, _ := sel.Requirements()
	failed := 0
	for _, r := range reqs {
		if r.Matches(labels.Set(ns.Labels)) {
			continue
		}
		if r.Key() != corev1.LabelMetadataName {
			return false
		}
		failed++
	}
	return failed > 0
}

// SubresourcesOnly reports whether every rule of the webhook names only
// subresources (such as pods/ephemeralcontainers): such a webhook never
// receives the CREATE of a pod and mutates nothing.
func SubresourcesOnly(w *admissionregistrationv1.MutatingWebhook) bool {
	if len(w.Rules) == 0 {
		return false
	}
	for _, r := range w.Rules {
		for _, res := range r.Resources {
			// "*/*" is every resource and every subresource.
			if !strings.Contains(res, "/") || res == "*/*" {
				return false
			}
		}
	}
	return true
}

// podCreateRule reports whether a rule covers CREATE of namespaced v1 pods.
func podCreateRule(r admissionregistrationv1.RuleWithOperations) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	ops := slices.ContainsFunc(r.Operations, func(o admissionregistrationv1.OperationType) bool {
		return o == admissionregistrationv1.Create || o == admissionregistrationv1.OperationAll
	})
	scope := r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes || *r.Scope == admissionregistrationv1.NamespacedScope
	return ops && scope && has(r.APIGroups, "") && has(r.APIVersions, "v1") &&
		(has(r.Resources, "pods") || slices.Contains(r.Resources, "*/*"))
}

// Drift compares what a pod's status annotation records with what the
// current policies do to it (res, the core's result for the pod) and names
// every difference. sent says whether the webhook configuration sends such
// a pod now; failurePolicy is the webhook's.
func Drift(pod *corev1.Pod, res mutate.Result, sent bool, failurePolicy string) ([]string, error) {
	type recordedPolicy struct{ Name, Hash, Mode string }
	raw, annotated := pod.Annotations[mutate.StatusAnnotation]
	var recorded struct {
		Policies []recordedPolicy `json:"policies"`
	}
	if annotated {
		if err := json.Unmarshal([]byte(raw), &recorded); err != nil {
			return nil, fmt.Errorf("annotation %s is not valid: %w", mutate.StatusAnnotation, err)
		}
	}
	var current []mutate.PolicyResult
	for _, pr := range res.Policies {
		if pr.Matched && pr.Enforcement != "shadow" {
			current = append(current, pr)
		}
	}
	var drift []string
	if !annotated {
		if len(current) > 0 && res.PodSkipped == "" && onlyStatusAdded(pod, res.Pod) {
			return append(drift, fmt.Sprintf("the pod has what the current policies (%s) inject, but sandbox-webhook did not put it there (no %s annotation): another mutator did, such as a Kyverno policy, which records nothing on the pod",
				names(current), mutate.StatusAnnotation)), nil
		}
		if len(current) > 0 && res.PodSkipped == "" {
			msg := fmt.Sprintf("the pod was not mutated, but the current policies select it (%s)", names(current))
			switch {
			case !sent:
				msg += ": the webhook configuration does not send it"
			case failurePolicy == string(admissionregistrationv1.Ignore):
				msg += ": it was created while the webhook did not answer (failurePolicy Ignore), or before the policy or the webhook existed; recreate it"
			default:
				msg += ": it was created before the policy or the webhook existed; recreate it"
			}
			drift = append(drift, msg)
		}
		return drift, nil
	}
	for _, r := range recorded.Policies {
		i := slices.IndexFunc(current, func(pr mutate.PolicyResult) bool { return pr.Policy == r.Name })
		if i < 0 {
			drift = append(drift, fmt.Sprintf("policy %s (hash %s) mutated the pod, but no current policy of that name selects it", r.Name, r.Hash))
			continue
		}
		pr := current[i]
		if pr.Hash != r.Hash {
			drift = append(drift, fmt.Sprintf("policy %s: created under an older version (hash %s; now %s); recreate the pod to get the current injection", r.Name, r.Hash, pr.Hash))
		}
		if string(pr.Mode) != r.Mode {
			drift = append(drift, fmt.Sprintf("policy %s: mutated in %s mode, but now runs in %s mode (leak mitigation changed since); recreate the pod to switch", r.Name, r.Mode, pr.Mode))
		}
	}
	for _, pr := range current {
		if !slices.ContainsFunc(recorded.Policies, func(r recordedPolicy) bool { return r.Name == pr.Policy }) {
			drift = append(drift, fmt.Sprintf("policy %s selects the pod now but did not mutate it at creation", pr.Policy))
		}
	}
	return drift, nil
}

func names(prs []mutate.PolicyResult) string {
	n := make([]string, len(prs))
	for i, pr := range prs {
		n[i] = pr.Policy
	}
	return strings.Join(n, ", ")
}

// onlyStatusAdded reports whether mutated is pod with the status annotation
// added and nothing else changed: the pod has everything the policies
// inject.
func onlyStatusAdded(pod, mutated *corev1.Pod) bool {
	if mutated == nil {
		return false
	}
	m := mutated.DeepCopy()
	delete(m.Annotations, mutate.StatusAnnotation)
	if len(m.Annotations) == 0 && len(pod.Annotations) == 0 {
		m.Annotations = pod.Annotations
	}
	return equality.Semantic.DeepEqual(m, pod)
}
