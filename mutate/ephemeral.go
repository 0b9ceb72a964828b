package mutate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// EphemeralMirrors rewrites in pod, by the image mirrors of the enforcing
// policies that select it, the images of the ephemeral containers that a
// pods/ephemeralcontainers update adds (kubectl debug): those old, the
// stored pod, does not have. The policies are matched on old, whose labels
// the update cannot change. The first policy whose rules hold an image
// rewrites it, as at CREATE. It returns the items it changed
// ("mirror/<container>"), nil when nothing changed.
func EphemeralMirrors(pod, old *corev1.Pod, ns Namespace, set *policy.Set, opts Options) []string {
	stored := old
	if stored == nil {
		stored = pod
	}
	if set == nil || skipPod(stored, ns, opts) != "" {
		return nil
	}
	var rules [][]imageref.Rule
	for _, p := range set.Policies {
		if len(p.Mirrors) > 0 && p.Spec.Enforcement == policy.Enforce && match(p, stored, ns).Matched() {
			rules = append(rules, p.Mirrors)
		}
	}
	if len(rules) == 0 {
		return nil
	}
	var items []string
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i]
		if old != nil && slices.ContainsFunc(old.Spec.EphemeralContainers, func(o corev1.EphemeralContainer) bool { return o.Name == c.Name }) {
			continue // stored already: it can no longer change
		}
		for _, r := range rules {
			if out, rule, err := imageref.Rewrite(c.Image, r); err == nil && rule >= 0 {
				c.Image = out
				items = append(items, "mirror/"+c.Name)
				break
			}
		}
	}
	return items
}
