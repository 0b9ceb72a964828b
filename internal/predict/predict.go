// Package predict is the apiserver's verdict on a mutated pod, predicted
// offline for dry-run --predict: whether it accepts the pod (Pod Security,
// the pod-level resource rules, strict decoding, part of its pod
// validation) and what it would not store, for the apiserver version and
// feature gates given (Target).
package predict

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
)

// Verdict is what the apiserver is predicted to do with one pod.
type Verdict struct {
	// Problems say why it would reject the pod; none: it accepts it.
	Problems []string
	// Notes say what it would accept but store otherwise than sent.
	Notes []string
}

// Pod predicts the verdict on the mutated pod p of an apiserver of target t.
func Pod(p *preview.Pod, t Target) Verdict {
	pod, notes := t.Stored(p.Result.Pod)
	if RequestDefaultsToLimit(&p.Result.Pod.Spec) {
		notes = append(notes, "a pod-level memory limit with no memory request anywhere: the apiserver sets the pod-level request to the limit")
	}
	var problems []string
	if p.Result.Denied != "" {
		problems = append(problems, "denied by the webhook: "+p.Result.Denied)
	}
	for _, u := range p.Unknown {
		problems = append(problems, "strict decoding error: "+u)
	}
	if level, ok := p.Namespace.Labels[psaapi.EnforceLevelLabel]; ok {
		problems = append(problems, podSecurityProblems(pod, level)...)
	}
	problems = append(problems, PodResourceProblems(&pod.Spec)...)
	problems = append(problems, VolumeReferenceProblems(&pod.Spec)...)
	problems = append(problems, podValidationProblems(pod)...)
	return Verdict{Problems: problems, Notes: notes}
}

// Write prints the verdict on the object named name. Its lines start with
// "check:", as they did under the flag's first name, --check: scripts and
// golden files read them.
func (v Verdict) Write(w *preview.ReportWriter, name string) {
	for _, n := range v.Notes {
		w.Line("check: %s: note: %s", name, n)
	}
	if len(v.Problems) == 0 {
		w.Line("check: %s: accepted", name)
		return
	}
	w.Line("check: %s: would be rejected:", name)
	for _, pr := range v.Problems {
		w.Line("  - %s", pr)
	}
}

// UnknownKind is the verdict on an object of kind, which differs only in
// case from want, a kind the apiserver knows: it knows no kind. w, when
// not nil, is told; the problem is returned.
func UnknownKind(w *preview.ReportWriter, name, kind, want string) string {
	problem := fmt.Sprintf("no kind %q is registered", kind)
	if w != nil {
		w.Line("check: %s: would be rejected: %s (did you mean %q?)", name, problem, want)
	}
	return problem
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
