package mutate

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The core changes a pod only in these places, its regions:
//
//   - metadata.annotations (the status annotation);
//   - spec.volumes (volumes appended; an emptyDir's medium cleared);
//   - spec.resources (the pod-level memory);
//   - in every init container and container: env (appended, or one
//     replaced), volumeMounts (appended) and resources (memory).
//
// writable copies exactly these, so the core can write them without touching
// its input. A new place the core writes must be added to it; TestRegions
// checks that it covers everything the corpus and random pods exercise.

// writable returns a shallow copy of pod whose regions are copies the core
// may change; every other part is shared with pod and must not be written.
func writable(pod *corev1.Pod) *corev1.Pod {
	out := *pod
	out.Annotations = maps.Clone(pod.Annotations)
	out.Spec.Volumes = slices.Clone(pod.Spec.Volumes)
	out.Spec.Resources = pod.Spec.Resources.DeepCopy() // nil stays nil
	out.Spec.InitContainers = writableContainers(pod.Spec.InitContainers)
	out.Spec.Containers = writableContainers(pod.Spec.Containers)
	return &out
}

func writableContainers(cs []corev1.Container) []corev1.Container {
	out := slices.Clone(cs) // nil stays nil
	for i := range out {
		c := &out[i]
		c.Env = slices.Clone(c.Env)
		c.VolumeMounts = slices.Clone(c.VolumeMounts)
		c.Resources.Limits = maps.Clone(c.Resources.Limits)
		c.Resources.Requests = maps.Clone(c.Resources.Requests)
	}
	return out
}
