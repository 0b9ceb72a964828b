package cli

import (
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// checkPod predicts whether the apiserver accepts the mutated pod, prints
// the verdict and returns 1 when it would be rejected, else 0.
func checkPod(w io.Writer, p *dryRunPod) int {
	pod := p.result.Pod
	var problems []string
	if level, ok := p.ns.Labels[psaEnforceLabel]; ok {
		problems = append(problems, podSecurityProblems(pod, level)...)
	}
	problems = append(problems, mutate.PodResourceProblems(&pod.Spec)...)
	problems = append(problems, mutate.VolumeReferenceProblems(&pod.Spec)...)
	if mutate.RequestDefaultsToLimit(&pod.Spec) {
		fmt.Fprintf(w, "check: %s: note: a pod-level memory limit with no memory request anywhere: the apiserver sets the pod-level request to the limit\n", p.name)
	}
	if len(problems) == 0 {
		fmt.Fprintf(w, "check: %s: accepted\n", p.name)
		return 0
	}
	fmt.Fprintf(w, "check: %s: would be rejected:\n", p.name)
	for _, pr := range problems {
		fmt.Fprintf(w, "  - %s\n", pr)
	}
	return 1
}

const psaEnforceLabel = psaapi.EnforceLevelLabel

// podSecurityProblems evaluates the pod against the namespace's enforced
// Pod Security level with the apiserver's own checks.
func podSecurityProblems(pod *corev1.Pod, level string) []string {
	lvl, err := psaapi.ParseLevel(level)
	if err != nil {
		return []string{fmt.Sprintf("namespace label %s=%q is not a Pod Security level; the apiserver treats it as restricted", psaapi.EnforceLevelLabel, level)}
	}
	if lvl == psaapi.LevelPrivileged {
		return nil
	}
	eval, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return []string{fmt.Sprintf("evaluating Pod Security: %v", err)}
	}
	results := eval.EvaluatePod(psaapi.LevelVersion{Level: lvl, Version: psaapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec)
	agg := psapolicy.AggregateCheckResults(results)
	if agg.Allowed {
		return nil
	}
	return []string{fmt.Sprintf("violates PodSecurity %q: %s", level, strings.TrimSpace(agg.ForbiddenDetail()))}
}
