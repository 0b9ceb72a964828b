package mutate

import (
	"fmt"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// MatchReason says why a policy did not select a pod. It holds only what
// the message needs and formats it when read, so that the policies a pod
// does not match (most of them, on a cluster with many) cost no formatting
// on the admission path. The zero value means the policy matched and
// prints as "".
type MatchReason struct {
	kind reasonKind
	p    *policy.Policy
	ns   string // the namespace's name
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
)

// String is the reason as the report and the logs show it.
func (r MatchReason) String() string {
	switch r.kind {
	case namespaceExcluded:
		return fmt.Sprintf("namespace %q is excluded by match.excludeNamespaces (%s)", r.ns, firstGlob(r.p.Spec.Match.ExcludeNamespaces, r.ns))
	case namespaceNotListed:
		return fmt.Sprintf("namespace %q is not in match.namespaces %v", r.ns, r.p.Spec.Match.Namespaces)
	case namespaceLabels:
		return fmt.Sprintf("namespace labels do not match match.namespaceSelector (%s)", r.p.NamespaceSelector)
	case podNotSelected:
		return fmt.Sprintf("pod labels do not match match.podSelector (%s)", r.p.PodSelector)
	case podExcluded:
		return fmt.Sprintf("pod labels match match.excludePodSelector (%s)", r.p.ExcludePodSelector)
	case optOutLabel:
		return fmt.Sprintf("pod opted out with label %s=true", r.p.Spec.Match.OptOut.Label)
	case optOutAnnotation:
		return fmt.Sprintf("pod opted out with annotation %s=true", r.p.Spec.Match.OptOut.Annotation)
	}
	return ""
}

// Matched reports whether the policy matched (the reason is empty).
func (r MatchReason) Matched() bool { return r.kind == matched }
