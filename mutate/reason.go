package mutate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// MatchReason says why a policy did not select a pod. It holds only what
// the message needs and formats it when read, so that the policies a pod
// does not match (most of them, on a cluster with many) cost no formatting
// on the admission path. A reason whose Matched is true prints as "";
// MatchedBy names the match.any block that selected the pod.
type MatchReason struct {
	kind reasonKind
	p    *policy.Policy
	ns   string // the namespace's name
	// block is 0 for the fields of match itself and i+1 for match.any[i].
	block int

	// For noBlock: what the blocks' reasons are recomputed from when the
	// reason is read.
	pod      *corev1.Pod
	nsLabels map[string]string
}

type reasonKind uint8

const (
	matched reasonKind = iota
	namespaceExcluded
	namespaceNotListed
	namespaceLabels
	podNotSelected
	podExcluded
	optOutLabel
	optOutAnnotation
	noBlock
)

// String is the reason as the report and the logs show it.
func (r MatchReason) String() string {
	f := r.field()
	b := func() policy.MatchBlock { return blockOf(r.p, r.block) }
	sel := func() policy.Selectors { return selectorsOf(r.p, r.block) }
	switch r.kind {
	case namespaceExcluded:
		return fmt.Sprintf("namespace %q is excluded by %s.excludeNamespaces (%s)", r.ns, f, firstGlob(b().ExcludeNamespaces, r.ns))
	case namespaceNotListed:
		return fmt.Sprintf("namespace %q is not in %s.namespaces %v", r.ns, f, b().Namespaces)
	case namespaceLabels:
		return fmt.Sprintf("namespace labels do not match %s.namespaceSelector (%s)", f, sel().NamespaceSelector)
	case podNotSelected:
		return fmt.Sprintf("pod labels do not match %s.podSelector (%s)", f, sel().PodSelector)
	case podExcluded:
		return fmt.Sprintf("pod labels match %s.excludePodSelector (%s)", f, sel().ExcludePodSelector)
	case optOutLabel:
		return fmt.Sprintf("pod opted out with label %s=true", r.p.Spec.Match.OptOut.Label)
	case optOutAnnotation:
		return fmt.Sprintf("pod opted out with annotation %s=true", r.p.Spec.Match.OptOut.Annotation)
	case noBlock:
		parts := make([]string, len(r.p.Any))
		for i := range r.p.Any {
			parts[i] = matchBlock(r.p, i+1, r.pod, Namespace{Name: r.ns, Labels: r.nsLabels}).String()
		}
		return "no match.any block selects the pod: " + strings.Join(parts, "; ")
	}
	return ""
}

// field is the policy field the reason is about: match or match.any[i].
func (r MatchReason) field() string {
	if r.block > 0 {
		return fmt.Sprintf("match.any[%d]", r.block-1)
	}
	return "match"
}

// Matched reports whether the policy matched (the reason is empty).
func (r MatchReason) Matched() bool { return r.kind == matched }

// MatchedBy names the match.any block that selected the pod, such as
// "match.any[1]"; it is "" when the policy did not match or has no
// match.any.
func (r MatchReason) MatchedBy() string {
	if r.kind != matched || r.block == 0 {
		return ""
	}
	return r.field()
}
