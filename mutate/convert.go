package mutate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// convert moves the pod's own memory-backed emptyDirs to disk (leak
// mitigation), except the ones the policy keeps and the ones a policy's
// cache or asset names. It runs after every policy's apply.
func (a *applier) convert() {
	for i := range a.pod.Spec.Volumes {
		v := &a.pod.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
			continue
		}
		// A volume named by a policy's cache or asset is that item's:
		// the policy's injection, or the pod's own volume, which the
		// pod keeps whole (medium included) like every item it sets.
		if _, ok := a.claims["volume/"+v.Name]; ok {
			continue
		}
		item := "convert/" + v.Name
		// The first disk-mode policy to decide about a volume owns the
		// decision: a later one neither converts what it kept nor
		// records a keep of its own, so a second pass decides the same.
		if _, ok := a.claims[item]; ok {
			continue
		}
		a.claims[item] = a.p.Name()
		if a.keeps(v.Name) {
			a.skip(item, "kept on tmpfs by keepMemoryVolumes", false)
			continue
		}
		v.EmptyDir.Medium = corev1.StorageMediumDefault
		a.st.dirty = true
		// Recorded in status.Converted, not in the policy's injected
		// items: a later pass finds the volume already on disk.
		a.st.Converted = append(a.st.Converted, v.Name)
		a.res.Applied = append(a.res.Applied, Decision{Policy: a.p.Name(), Item: item, Shadow: a.shadow})
	}
}

func (a *applier) keeps(volume string) bool {
	return slices.ContainsFunc(a.p.Spec.KeepMemoryVolumes, func(ref policy.VolumeRef) bool {
		return ref.Name != "" && ref.Name == volume || ref.MountPath != "" && mountsAt(a.pod, volume, ref.MountPath)
	})
}

// mountsAt reports whether an init or app container's first mount at
// mountPath is of volume.
func mountsAt(pod *corev1.Pod, volume, mountPath string) bool {
	at := func(m corev1.VolumeMount) bool { return m.MountPath == mountPath }
	for c := range PodContainers(&pod.Spec) {
		if j := slices.IndexFunc(c.VolumeMounts, at); j >= 0 && c.VolumeMounts[j].Name == volume {
			return true
		}
	}
	return false
}
