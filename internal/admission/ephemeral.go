package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// ephemeralHostPathProblems says how the ephemeral containers a
// pods/ephemeralcontainers update adds mount a hostPath volume of the pod
// other than read-only, whole (no subPath or subPathExpr) and without mount
// propagation: the way every hostPath this webhook injects is mounted. It
// returns nil when there is nothing to refuse.
//
// Nothing in the pod's annotations is trusted: every hostPath volume of the
// pod counts, whether a policy injected it or not, and a volume is a hostPath
// if it is one in the stored pod (old) or in the request's (pod); the API
// server keeps the stored pod's volumes on this subresource anyway. An
// ephemeral container the stored pod already has, with the same mounts, is
// not judged again: it can no longer change.
func ephemeralHostPathProblems(pod, old *corev1.Pod) []string {
	hostPath := map[string]bool{}
	for _, p := range []*corev1.Pod{old, pod} {
		if p == nil {
			continue
		}
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].HostPath != nil {
				hostPath[p.Spec.Volumes[i].Name] = true
			}
		}
	}
	if len(hostPath) == 0 {
		return nil
	}
	existing := map[string][]corev1.VolumeMount{}
	if old != nil {
		for i := range old.Spec.EphemeralContainers {
			c := &old.Spec.EphemeralContainers[i]
			existing[c.Name] = c.VolumeMounts
		}
	}
	var out []string
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i]
		if mounts, ok := existing[c.Name]; ok && equality.Semantic.DeepEqual(mounts, c.VolumeMounts) {
			continue
		}
		for j := range c.VolumeMounts {
			m := &c.VolumeMounts[j]
			if !hostPath[m.Name] {
				continue
			}
			wrong := mutate.PartialMount(m)
			if !m.ReadOnly {
				wrong = append([]string{"not readOnly"}, wrong...)
			}
			if len(wrong) > 0 {
				out = append(out, fmt.Sprintf("spec.ephemeralContainers[%d].volumeMounts[%d]: ephemeral container %q mounts hostPath volume %q %s",
					i, j, c.Name, m.Name, strings.Join(wrong, ", ")))
			}
		}
	}
	return out
}
