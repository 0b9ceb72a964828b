package mutate

import (
	"fmt"
	"maps"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Pod applies every matching policy of set to pod, in the set's order (by
// policy name). It never modifies pod: when something changes, Result.Pod is
// a copy.
//
// It is idempotent: applied to its own output it changes nothing. It is
// convergent: when another webhook adds a container and the apiserver
// reinvokes the webhook, that container receives its mounts and env and the
// pod-level memory is recomputed, without anything else changing.
func Pod(pod *corev1.Pod, ns Namespace, set *policy.Set, opts Options) (res Result) {
	res = apply(pod, ns, set, opts)
	res.Warnings = clientWarnings(res.Warnings)
	if opts.StatusAlways && !metav1.HasAnnotation(res.Pod.ObjectMeta, StatusAnnotation) {
		res.Pod = res.Pod.DeepCopy()
		(&status{Policies: []*statusPolicy{}}).write(res.Pod)
		res.Changed, res.OnlyStatus = true, true
	}
	return res
}

// apply is Pod before its warnings are formatted for the client and
// before StatusAlways.
func apply(pod *corev1.Pod, ns Namespace, set *policy.Set, opts Options) (res Result) {
	res.Pod = pod
	if reason := skipPod(pod, ns, opts); reason != "" {
		res.PodSkipped = reason
		return res
	}
	if set == nil {
		return res
	}

	if len(set.Policies) > 0 {
		res.Policies = make([]PolicyResult, 0, len(set.Policies))
	}
	prev := readStatus(pod)
	st := &status{}
	claims := map[string]string{}
	var out *corev1.Pod
	var checked bool
	var unbounded string
	// Disk-mode policies convert the pod's own tmpfs emptyDirs after every
	// policy has injected, so no policy's cache is mistaken for the pod's,
	// whatever the order.
	var converters []*applier
	// Every policy's memory comes after every policy's other items
	// (kind.last), in policy order.
	var finishers []*applier
	for _, p := range set.Policies {
		mode := opts.LeakMitigation.Mode(p)
		reason := match(p, pod, ns)
		res.Policies = append(res.Policies, PolicyResult{
			Policy:      p.Name(),
			Hash:        p.Hash,
			Matched:     reason.Matched(),
			Reason:      reason,
			Enforcement: p.Spec.Enforcement,
			Mode:        mode,
		})
		if !reason.Matched() {
			continue
		}

		shadow := p.Spec.Enforcement == policy.Shadow
		if !checked {
			// Before anything of the pod is compared or added: no
			// quantity beyond a node's reaches the arithmetic.
			checked, unbounded = true, UnboundedQuantity(&pod.Spec)
		}
		if unbounded != "" {
			a := &applier{p: p, res: &res, shadow: shadow, sp: &statusPolicy{}}
			a.deny("pod", unboundedReason(unbounded))
			continue
		}
		if out == nil {
			out = pod.DeepCopy()
		}
		a := &applier{
			p:      p,
			mode:   mode,
			ns:     ns,
			prev:   prev,
			res:    &res,
			shadow: shadow,
			podLvl: opts.PodLevelResources,
			imgVol: opts.ImageVolumes,
			pod:    out,
			claims: claims,
			st:     st,
		}
		if shadow {
			// Compute on a scratch copy with scratch claims: shadow
			// policies report what they would do and change nothing.
			a.pod, a.claims, a.st = out.DeepCopy(), maps.Clone(claims), &status{}
		}
		a.apply()
		if shadow {
			a.finish()
		} else {
			finishers = append(finishers, a)
		}
		if mode == policy.ModeDisk {
			if shadow {
				a.convert()
			} else {
				converters = append(converters, a)
			}
		}
	}
	for _, a := range finishers {
		a.finish()
	}
	for _, a := range converters {
		a.convert()
	}
	if out == nil || len(st.Policies) == 0 {
		return res
	}
	if prev != nil {
		st.carryConversions(prev, out)
		st.restoreLimits(prev, out)
	}
	slices.Sort(st.Converted)
	if st.write(out) || st.dirty {
		res.Pod = out
		res.Changed = true
	}
	return res
}

// skipPod returns why the whole pod is not mutated, or "".
func skipPod(pod *corev1.Pod, ns Namespace, opts Options) string {
	if ns.Name == "kube-system" {
		return "namespace kube-system is never mutated"
	}
	if slices.Contains(opts.ExcludeNamespaces, ns.Name) {
		return fmt.Sprintf("namespace %s is excluded (--exclude-namespace)", ns.Name)
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows {
		return "Windows pods are not mutated: the caches, env and pod-level resources are Linux-only"
	}
	return ""
}

// match returns why p does not select pod, or a MatchReason that reports
// Matched, naming the match.any block that selected the pod if any. Nothing
// is formatted here: see MatchReason.
func match(p *policy.Policy, pod *corev1.Pod, ns Namespace) MatchReason {
	if r := matchBlock(p, 0, pod, ns); !r.Matched() {
		return r
	}
	if o := p.Spec.Match.OptOut; o != nil {
		if o.Label != "" && pod.Labels[o.Label] == "true" {
			return MatchReason{kind: optOutLabel, p: p}
		}
		if o.Annotation != "" && pod.Annotations[o.Annotation] == "true" {
			return MatchReason{kind: optOutAnnotation, p: p}
		}
	}
	if len(p.Any) == 0 {
		return MatchReason{}
	}
	for i := range p.Any {
		if r := matchBlock(p, i+1, pod, ns); r.Matched() {
			return r
		}
	}
	return MatchReason{kind: noBlock, p: p, pod: pod, ns: ns.Name, nsLabels: ns.Labels}
}

// matchBlock matches the selection fields of match (block 0) or of
// match.any[block-1].
func matchBlock(p *policy.Policy, block int, pod *corev1.Pod, ns Namespace) MatchReason {
	b := blockOf(p, block)
	if g := firstGlob(b.ExcludeNamespaces, ns.Name); g != "" {
		return MatchReason{kind: namespaceExcluded, p: p, ns: ns.Name, block: block}
	}
	if len(b.Namespaces) > 0 && firstGlob(b.Namespaces, ns.Name) == "" {
		return MatchReason{kind: namespaceNotListed, p: p, ns: ns.Name, block: block}
	}
	sel := selectorsOf(p, block)
	if sel.NamespaceSelector != nil && !sel.NamespaceSelector.Matches(labels.Set(ns.Labels)) {
		return MatchReason{kind: namespaceLabels, p: p, block: block}
	}
	podLabels := labels.Set(pod.Labels)
	if sel.PodSelector != nil && !sel.PodSelector.Matches(podLabels) {
		return MatchReason{kind: podNotSelected, p: p, block: block}
	}
	if sel.ExcludePodSelector != nil && sel.ExcludePodSelector.Matches(podLabels) {
		return MatchReason{kind: podExcluded, p: p, block: block}
	}
	return MatchReason{block: block}
}

// blockOf returns the selection fields of match (block 0) or of
// match.any[block-1].
func blockOf(p *policy.Policy, block int) policy.MatchBlock {
	if block > 0 {
		return p.Spec.Match.Any[block-1]
	}
	m := &p.Spec.Match
	return policy.MatchBlock{
		Namespaces:        m.Namespaces,
		ExcludeNamespaces: m.ExcludeNamespaces,
	}
}

// selectorsOf returns the compiled selectors of match (block 0) or of
// match.any[block-1].
func selectorsOf(p *policy.Policy, block int) policy.Selectors {
	if block > 0 {
		return p.Any[block-1]
	}
	return policy.Selectors{NamespaceSelector: p.NamespaceSelector, PodSelector: p.PodSelector, ExcludePodSelector: p.ExcludePodSelector}
}

// firstGlob returns the first pattern that matches name, or "" when none
// does (validation refuses an empty pattern).
func firstGlob(patterns []string, name string) string {
	for _, g := range patterns {
		if ok, _ := path.Match(g, name); ok {
			return g
		}
	}
	return ""
}
