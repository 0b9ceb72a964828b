package maprun

import (
	"context"
	"errors"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
)

// WebhookMatches evaluates a webhook's matchConditions for a pod CREATE in
// namespace ns with the apiserver's own matcher, as the user name. It
// returns whether they all hold and, when one does not, its name. A
// condition that needs the authorizer is evaluated without one and errs.
func WebhookMatches(ctx context.Context, conds []admissionregistrationv1.MatchCondition, failurePolicy *admissionregistrationv1.FailurePolicyType, pod *corev1.Pod, ns *corev1.Namespace, userName string) (bool, string, error) {
	if len(conds) == 0 {
		return true, "", nil
	}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(mapexport.CELCompatibility))
	if err != nil {
		return false, "", err
	}
	acc := make([]plugincel.ExpressionAccessor, len(conds))
	for i := range conds {
		acc[i] = (*matchconditions.MatchCondition)(&conds[i])
	}
	cond := compiler.CompileCondition(acc, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
	if errs := cond.CompilationErrors(); len(errs) > 0 {
		return false, "", errors.Join(errs...)
	}
	fp := admissionregistrationv1.Fail
	if failurePolicy != nil {
		fp = *failurePolicy
	}
	obj := pod.DeepCopy()
	obj.SetGroupVersionKind(podGVK)
	attr := admission.NewAttributesRecord(obj, nil, podGVK, ns.Name, pod.Name, podGVR, "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: userName})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: podGVK, VersionedObject: admission.NewLazyObject(obj)}
	r := matchconditions.NewMatcher(cond, &fp, "webhook", "admit", "check").Match(compiler.CreateContext(ctx), va, nil, nil)
	if r.Error != nil {
		return false, "", r.Error
	}
	return r.Matches, r.FailedConditionName, nil
}
