package mutate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// shm mounts a memory-backed emptyDir of the policy's size at /dev/shm in
// the selected containers. It stays on tmpfs in disk mode: it is the pod's
// shared memory, not a cache (convert leaves a volume a policy names
// alone). A pod with its own volume of that name, or a container that
// mounts something at /dev/shm, keeps its own (volume). Its pages are
// charged as a cache's: to the memory limit of the container that writes
// them (the warning, or containerLimits: raise).
func (a *applier) shm(sel []target) {
	if a.p.Spec.Shm == nil {
		return
	}
	a.item(func() {
		want := a.shmVolume()
		item := "shm/" + want.Name
		a.volume(item, want, policy.ShmPath, false, sel)
		if !a.raises() {
			a.warnCharged(item, "this /dev/shm", want, policy.ShmPath, sel)
		}
	})
}

// shmVolume is the volume of the policy's shm.
func (a *applier) shmVolume() corev1.Volume {
	return corev1.Volume{Name: a.p.Spec.Shm.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: a.p.ShmSize,
	}}}
}
