package maprun

import (
	"cmp"
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
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
	cond, err := compileConditions(compiler, conds, plugincel.OptionalVariableDeclarations{HasAuthorizer: true})
	if err != nil {
		return false, "", err
	}
	fp := cmp.Or(failurePolicy, new(admissionregistrationv1.Fail))
	r := matchconditions.NewMatcher(cond, fp, "webhook", "admit", "check").Match(compiler.CreateContext(ctx), createAttributes(pod, ns, userName), nil, nil)
	if r.Error != nil {
		return false, "", r.Error
	}
	return r.Matches, r.FailedConditionName, nil
}
