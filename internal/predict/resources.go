package predict

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// PodResourceProblems returns the reasons the apiserver would reject the
// pod's memory settings: a container request above its limit, and the
// pod-level rules (KEP-2837 validation). The core never produces such a pod
// itself.
func PodResourceProblems(spec *corev1.PodSpec) []string {
	var out []string
	for c := range mutate.PodContainers(spec) {
		req, hasReq := c.Resources.Requests[corev1.ResourceMemory]
		lim, hasLim := c.Resources.Limits[corev1.ResourceMemory]
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			out = append(out, fmt.Sprintf("container %q memory request %s exceeds its limit %s", c.Name, req.String(), lim.String()))
		}
	}
	if spec.Resources == nil {
		return out
	}
	lim, hasLim := spec.Resources.Limits[corev1.ResourceMemory]
	req, hasReq := spec.Resources.Requests[corev1.ResourceMemory]
	if hasLim {
		for c := range mutate.PodContainers(spec) {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(lim) > 0 {
				out = append(out, fmt.Sprintf("container %q memory limit %s exceeds the pod-level limit %s", c.Name, q.String(), lim.String()))
			}
		}
	}
	if hasReq {
		if agg := mutate.ContainerMemoryRequest(spec); agg.Cmp(req) > 0 {
			out = append(out, fmt.Sprintf("pod-level memory request %s is below the containers' aggregate request %s", req.String(), agg.String()))
		}
		if hasLim && req.Cmp(lim) > 0 {
			out = append(out, fmt.Sprintf("pod-level memory request %s exceeds the pod-level limit %s", req.String(), lim.String()))
		}
	}
	return out
}

// RequestDefaultsToLimit reports the pod-level request trap: a pod-level
// memory limit with no memory request anywhere makes the apiserver default
// the pod-level request to the limit. Such a pod is admitted, but it reserves
// the whole headroom on its node.
func RequestDefaultsToLimit(spec *corev1.PodSpec) bool {
	if spec.Resources == nil {
		return false
	}
	_, hasLim := spec.Resources.Limits[corev1.ResourceMemory]
	_, hasReq := spec.Resources.Requests[corev1.ResourceMemory]
	agg := mutate.ContainerMemoryRequest(spec)
	return hasLim && !hasReq && agg.IsZero()
}

// VolumeReferenceProblems returns the apiserver's rejections of mounts and
// devices that name a volume the pod does not declare. The core leaves such
// a pod that way when the name is one of its volumes but the pod mounts it
// other than the policy does.
func VolumeReferenceProblems(spec *corev1.PodSpec) []string {
	declared := make(map[string]bool, len(spec.Volumes))
	for i := range spec.Volumes {
		declared[spec.Volumes[i].Name] = true
	}
	var out []string
	for ref, c := range mutate.AllContainers(spec) {
		for _, m := range c.VolumeMounts {
			if !declared[m.Name] {
				out = append(out, fmt.Sprintf("%s %q mounts volume %q, which the pod does not declare", ref.Kind(), c.Name, m.Name))
			}
		}
		for _, d := range c.VolumeDevices {
			if !declared[d.Name] {
				out = append(out, fmt.Sprintf("%s %q uses volume %q as a device, which the pod does not declare", ref.Kind(), c.Name, d.Name))
			}
		}
	}
	return out
}
