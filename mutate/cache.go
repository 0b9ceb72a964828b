package mutate

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// caches injects the policy's caches: an emptyDir each, memory-backed in
// memory mode, mounted in the selected containers.
func (a *applier) caches(sel []target) {
	for i := range a.p.Spec.Caches {
		a.item(func() { a.cache(i, sel) })
	}
}

func (a *applier) cache(i int, sel []target) {
	c := a.p.Spec.Caches[i]
	want := a.cacheVolume(i)
	a.volume("cache/"+c.Name, want, c.MountPath, false, sel)
	if a.mode == policy.ModeMemory && !a.raises() {
		a.warnCharged("cache/"+c.Name, "this in-memory cache", want, c.MountPath, sel)
	}
}

// cacheVolume is the volume the policy's i-th cache is in this mode.
func (a *applier) cacheVolume(i int) corev1.Volume {
	ed := &corev1.EmptyDirVolumeSource{SizeLimit: a.p.CacheSizes[i]}
	if a.mode == policy.ModeMemory {
		ed.Medium = corev1.StorageMediumMemory
	}
	return corev1.Volume{Name: a.p.Spec.Caches[i].Name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}}
}

// warnCharged warns about every selected container with a memory limit of
// its own that mounts the memory-backed cache vol: tmpfs pages are charged
// to the memory cgroup of the container that writes them, and stay there
// (no swap), so the cache takes up to its sizeLimit from that limit, which
// the pod-level headroom does not raise. A workload that fitted with its
// cache on disk, in reclaimable page cache, can be OOM-killed with it in
// memory. A limit equal to the headroom this policy sets per container (its
// memory.level container) is the headroom, not a limit of the pod's own.
func (a *applier) warnCharged(item, what string, vol corev1.Volume, mountPath string, sel []target) {
	if !a.injected(vol) {
		return // not injected, or the pod's own volume of that name
	}
	for _, t := range sel {
		lim, ok := a.ownLimit(t)
		if !ok || !slices.ContainsFunc(t.c.VolumeMounts, func(m corev1.VolumeMount) bool { return policyMount(&m, vol.Name, mountPath, false) }) {
			continue
		}
		// A limit an earlier pass raised goes back to what it was at the
		// end of this one (status.restoreLimits).
		if a.prev.raised(t.c.Name) != nil {
			if q, pr := a.raisedBefore(t, lim, a.cacheAdd(t)); pr != nil {
				lim = q
			}
		}
		a.warn("%s", chargedWarning(item, what, t.c.Name, lim, vol.EmptyDir.SizeLimit))
	}
}

// chargedWarning says that item's memory-backed volume (what: "this
// in-memory cache"), of at most size (nil: no sizeLimit), counts against the
// memory limit lim of the container named container, and what it leaves the
// container's processes.
func chargedWarning(item, what, container string, lim resource.Quantity, size *resource.Quantity) string {
	msg := fmt.Sprintf("%s: container %q limits its memory to %s, and %s counts against it", item, container, lim.String(), what)
	switch {
	case size == nil:
		return msg + " with no sizeLimit: it can take the whole limit (OOM kill)"
	case size.Cmp(lim) >= 0:
		return msg + fmt.Sprintf(": up to %s, the whole limit (OOM kill)", size.String())
	}
	left := lim.DeepCopy()
	left.Sub(*size)
	return msg + fmt.Sprintf(": up to %s, leaving %s to its processes before an OOM kill", size.String(), left.String())
}
