package mutate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ContainerMemoryRequest returns the pod's effective container memory
// request as the apiserver computes it when it validates pod-level resources
// (init containers, native sidecars and app containers combined per
// KEP-753), after the apiserver's own defaulting of a missing container
// request to its limit: what the core sets the pod-level request to at
// least, and what the apiserver holds a pod-level request to.
func ContainerMemoryRequest(spec *corev1.PodSpec) resource.Quantity {
	shadow := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: withDefaultedRequests(spec.InitContainers),
		Containers:     withDefaultedRequests(spec.Containers),
	}}
	reqs := resourcehelper.AggregateContainerRequests(shadow, resourcehelper.PodResourcesOptions{})
	q, ok := reqs[corev1.ResourceMemory]
	if !ok {
		return resource.Quantity{Format: resource.BinarySI}
	}
	return q
}

// withDefaultedRequests returns copies of cs carrying only what the request
// arithmetic reads, with a missing memory request defaulted to the limit.
func withDefaultedRequests(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			out[i].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: q}
		} else if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			out[i].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: q}
		}
	}
	return out
}

// maxContainerLimit returns the largest memory limit of any container: the
// apiserver rejects a pod whose pod-level limit is below one of them.
func maxContainerLimit(spec *corev1.PodSpec) resource.Quantity {
	max := resource.Quantity{Format: resource.BinarySI}
	for c := range PodContainers(spec) {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(max) > 0 {
			max = q.DeepCopy()
		}
	}
	return max
}

// setIn puts v at k in *m, making the map when it is nil.
func setIn[M ~map[K]V, K comparable, V any](m *M, k K, v V) {
	if *m == nil {
		*m = M{}
	}
	(*m)[k] = v
}

// quantityIs reports whether q equals the quantity s spells (compared as
// quantities: 8Gi and 8192Mi are equal).
func quantityIs(q resource.Quantity, s string) bool {
	p, ok := parseBounded(s)
	return ok && q.Cmp(p) == 0
}
