package charts

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestGuard: webhook.guard renders two pods entries that each fail open, the
// second called only for a pod without the status annotation (with the
// user's match conditions first), a ValidatingAdmissionPolicy with the
// webhook's selectors and conditions that denies such a pod, and the
// server's --status-always; with failurePolicy Ignore it renders none of it.
func TestGuard(t *testing.T) {
	const answered = "has(object.metadata.annotations) && 'sandbox-webhook.io/status' in object.metadata.annotations"
	r := mustRender(t, `
webhook:
  guard: {enabled: true}
  matchConditions: [{name: not-dry-run, expression: "!request.dryRun"}]
`)
	mwc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r)
	var names []string
	for _, w := range mwc.Webhooks {
		names = append(names, w.Name)
	}
	if want := []string{"pods.sandbox-webhook.io", "pods-retry.sandbox-webhook.io", "ephemeralcontainers.sandbox-webhook.io"}; !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	pods, retry := mwc.Webhooks[0], mwc.Webhooks[1]
	for _, w := range mwc.Webhooks[:2] {
		if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: failurePolicy %s, reinvocationPolicy %s; want Ignore, IfNeeded", w.Name, *w.FailurePolicy, *w.ReinvocationPolicy)
		}
		if !equalJSON(t, w.ObjectSelector, pods.ObjectSelector) || !equalJSON(t, w.NamespaceSelector, pods.NamespaceSelector) || !equalJSON(t, w.ClientConfig, pods.ClientConfig) {
			t.Errorf("%s: selectors or client differ from the pods entry's", w.Name)
		}
	}
	if *mwc.Webhooks[2].FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("the ephemeral containers entry fails open with the guard")
	}
	wantConds := []admissionregistrationv1.MatchCondition{{Name: "not-dry-run", Expression: "!request.dryRun"}}
	if !equalJSON(t, pods.MatchConditions, wantConds) {
		t.Errorf("pods entry's conditions %+v", pods.MatchConditions)
	}
	wantConds = append(wantConds, admissionregistrationv1.MatchCondition{Name: "sandbox-webhook-not-answered", Expression: "!(" + answered + ")"})
	if !equalJSON(t, retry.MatchConditions, wantConds) {
		t.Errorf("retry entry's conditions %+v", retry.MatchConditions)
	}

	vap := one[*admissionregistrationv1.ValidatingAdmissionPolicy](t, r)
	mc := vap.Spec.MatchConstraints
	if !equalJSON(t, mc.ObjectSelector, pods.ObjectSelector) || !equalJSON(t, mc.NamespaceSelector, pods.NamespaceSelector) || !equalJSON(t, mc.ResourceRules[0].RuleWithOperations, pods.Rules[0]) {
		t.Errorf("the guard's match %+v differs from the pods entry's", mc)
	}
	if !equalJSON(t, vap.Spec.MatchConditions, pods.MatchConditions) {
		t.Errorf("the guard's conditions %+v", vap.Spec.MatchConditions)
	}
	if len(vap.Spec.Validations) != 1 || vap.Spec.Validations[0].Expression != answered || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("the guard's validations %+v", vap.Spec.Validations)
	}
	b := one[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, r)
	if b.Spec.PolicyName != vap.Name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v", b.Spec)
	}
	// The guard's parameter is the webhook configuration: without it (an
	// uninstall deletes it first, or an operator switches the webhook
	// off), the guard refuses nothing.
	if pk := vap.Spec.ParamKind; pk == nil || pk.APIVersion != "admissionregistration.k8s.io/v1" || pk.Kind != "MutatingWebhookConfiguration" {
		t.Errorf("the guard's paramKind %+v", pk)
	}
	if pr := b.Spec.ParamRef; pr == nil || pr.Name != mwc.Name || pr.Namespace != "" || pr.Selector != nil ||
		pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
		t.Errorf("the guard's paramRef %+v, want the webhook configuration %s, Allow when it is gone", pr, mwc.Name)
	}
	if msg := vap.Spec.Validations[0].Message; !strings.HasSuffix(msg, "kubectl delete mutatingwebhookconfiguration "+mwc.Name) {
		t.Errorf("the guard's message %q does not end with the command that switches the webhook off", msg)
	}
	if args := deploymentContainer(t, r).Args; !slices.Contains(args, "--status-always=true") {
		t.Errorf("the server lacks --status-always: %v", args)
	}

	// From 1.36: a MutatingAdmissionPolicy, never reinvoked, with the same
	// match, removes a status annotation the pod brings, so that only one
	// a webhook call wrote satisfies the guard.
	unmark := one[*admissionregistrationv1.MutatingAdmissionPolicy](t, r)
	um := unmark.Spec.MatchConstraints
	if !equalJSON(t, um, mc) {
		t.Errorf("the unmark policy's match %+v differs from the guard's", um)
	}
	wantConds = append(slices.Clone(pods.MatchConditions), admissionregistrationv1.MatchCondition{Name: "sandbox-webhook-status-brought", Expression: answered})
	if !equalJSON(t, unmark.Spec.MatchConditions, wantConds) {
		t.Errorf("the unmark policy's conditions %+v", unmark.Spec.MatchConditions)
	}
	if unmark.Spec.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || *unmark.Spec.FailurePolicy != admissionregistrationv1.Fail ||
		len(unmark.Spec.Mutations) != 1 || unmark.Spec.Mutations[0].JSONPatch == nil ||
		unmark.Spec.Mutations[0].JSONPatch.Expression != "[JSONPatch{op: 'remove', path: '/metadata/annotations/sandbox-webhook.io~1status'}]" {
		t.Errorf("the unmark policy %+v", unmark.Spec)
	}
	if ub := one[*admissionregistrationv1.MutatingAdmissionPolicyBinding](t, r); ub.Spec.PolicyName != unmark.Name {
		t.Errorf("the unmark binding %+v", ub.Spec)
	}
	// Before 1.36 there is no MutatingAdmissionPolicy v1 to render.
	old := renderAt(t, "v1.35.4", "webhook: {guard: {enabled: true}}")
	if n := len(all[*admissionregistrationv1.MutatingAdmissionPolicy](old)); n != 0 || len(all[*admissionregistrationv1.ValidatingAdmissionPolicy](old)) != 1 {
		t.Errorf("on 1.35: %d MutatingAdmissionPolicies rendered, or the guard missing", n)
	}

	for _, values := range []string{"webhook: {guard: {enabled: false}}", "webhook: {guard: {enabled: true}, failurePolicy: Ignore}"} {
		r := mustRender(t, values)
		mwc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r)
		if len(mwc.Webhooks) != 2 || len(all[*admissionregistrationv1.ValidatingAdmissionPolicy](r)) != 0 ||
			len(all[*admissionregistrationv1.MutatingAdmissionPolicy](r)) != 0 || slices.Contains(deploymentContainer(t, r).Args, "--status-always=true") {
			t.Errorf("%s: %d entries, the guard rendered or --status-always set", values, len(mwc.Webhooks))
		}
	}
}

// TestMatchConditionsNarrowAnEmptyObjectSelector: pods with one label or
// another are selected with an empty objectSelector and matchConditions
// that say which; the chart accepts that without allowEmptyObjectSelector,
// and copies the conditions into both pods entries and the guard (the
// ephemeral containers entry keeps its own).
func TestMatchConditionsNarrowAnEmptyObjectSelector(t *testing.T) {
	const expr = "object.metadata.?labels[?'app'].orValue('') == 'sandbox' || 'agents.x-k8s.io/sandbox-name-hash' in object.metadata.?labels.orValue({})"
	r := mustRender(t, `
webhook:
  objectSelector: {matchLabels: null}
  matchConditions:
    - name: sandbox-pods
      expression: "`+expr+`"
`)
	mwc := one[*admissionregistrationv1.MutatingWebhookConfiguration](t, r)
	for _, w := range mwc.Webhooks[:2] {
		if w.ObjectSelector != nil && (len(w.ObjectSelector.MatchLabels) > 0 || len(w.ObjectSelector.MatchExpressions) > 0) {
			t.Errorf("%s: objectSelector %+v, want empty", w.Name, w.ObjectSelector)
		}
		if len(w.MatchConditions) == 0 || w.MatchConditions[0].Expression != expr {
			t.Errorf("%s: match conditions %+v", w.Name, w.MatchConditions)
		}
	}
	if vap := one[*admissionregistrationv1.ValidatingAdmissionPolicy](t, r); len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != expr {
		t.Errorf("the guard's conditions %+v", vap.Spec.MatchConditions)
	}
}
