package dryrun

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// checkProblems predicts whether the apiserver accepts the mutated pod and
// returns why it would not, and notes on what it would not store.
func checkProblems(p *preview.Pod, target kubeTarget) (problems, notes []string) {
	pod, notes := target.storedPod(p.Result.Pod)
	if p.Result.Denied != "" {
		problems = append(problems, "denied by the webhook: "+p.Result.Denied)
	}
	for _, u := range p.Unknown {
		problems = append(problems, "strict decoding error: "+u)
	}
	if level, ok := p.Namespace.Labels[psaapi.EnforceLevelLabel]; ok {
		problems = append(problems, podSecurityProblems(pod, level)...)
	}
	problems = append(problems, mutate.PodResourceProblems(&pod.Spec)...)
	problems = append(problems, mutate.VolumeReferenceProblems(&pod.Spec)...)
	problems = append(problems, podValidationProblems(pod)...)
	return problems, notes
}

// writeCheck prints the --check verdict for one pod.
func writeCheck(w *preview.ReportWriter, p *preview.Pod, problems, notes []string) {
	for _, n := range notes {
		w.Line("check: %s: note: %s", p.Name, n)
	}
	if mutate.RequestDefaultsToLimit(&p.Result.Pod.Spec) {
		w.Line("check: %s: note: a pod-level memory limit with no memory request anywhere: the apiserver sets the pod-level request to the limit", p.Name)
	}
	if len(problems) == 0 {
		w.Line("check: %s: accepted", p.Name)
		return
	}
	w.Line("check: %s: would be rejected:", p.Name)
	for _, pr := range problems {
		w.Line("  - %s", pr)
	}
}

// psaEvaluator is built once: a fleet's pods share it.
var psaEvaluator = sync.OnceValues(func() (psapolicy.Evaluator, error) {
	return psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
})

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
	eval, err := psaEvaluator()
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

// podValidationProblems runs the part of the apiserver's pod validation
// (k8s.io/kubernetes/pkg/apis/core/validation, which cannot be imported as a
// module) that pods most often fail and that is cheap to restate: unique
// container and volume names and resource
// quantities that are not negative and requests not above limits. Anything
// else that validation checks is not predicted.
func podValidationProblems(pod *corev1.Pod) []string {
	var problems []string
	names := map[string]bool{}
	volumes := map[string]bool{}
	for i, v := range pod.Spec.Volumes {
		if volumes[v.Name] {
			problems = append(problems, fmt.Sprintf("spec.volumes[%d].name: Duplicate value: %q", i, v.Name))
		}
		volumes[v.Name] = true
	}
	if len(pod.Spec.Containers) == 0 {
		problems = append(problems, "spec.containers: Required value")
	}
	for _, g := range []struct {
		path       string
		containers []corev1.Container
	}{{"spec.initContainers", pod.Spec.InitContainers}, {"spec.containers", pod.Spec.Containers}} {
		for i, c := range g.containers {
			path := fmt.Sprintf("%s[%d]", g.path, i)
			if names[c.Name] {
				problems = append(problems, fmt.Sprintf("%s.name: Duplicate value: %q", path, c.Name))
			}
			names[c.Name] = true
			for _, rl := range []struct {
				what string
				list corev1.ResourceList
			}{{"requests", c.Resources.Requests}, {"limits", c.Resources.Limits}} {
				for name, q := range rl.list {
					if q.Sign() < 0 {
						problems = append(problems, fmt.Sprintf("%s.resources.%s[%s]: Invalid value: %q: must be greater than or equal to 0", path, rl.what, name, q.String()))
					}
				}
			}
			for name, req := range c.Resources.Requests {
				if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
					problems = append(problems, fmt.Sprintf("%s.resources.requests: Invalid value: %q: must be less than or equal to %s limit of %s", path, req.String(), name, lim.String()))
				}
			}
		}
	}
	slices.Sort(problems)
	return problems
}
