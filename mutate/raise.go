package mutate

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// raiseLimits raises the memory limit of each selected container by the
// in-memory caches it mounts (containerLimits: raise).
func (a *applier) raiseLimits(sel []target) {
	if !a.raises() {
		return
	}
	for _, t := range sel {
		a.item(func() { a.raiseLimit(t) })
	}
}

// raises reports whether the policy raises container limits by its caches:
// containerLimits raise, in memory mode (on disk a cache is reclaimable page
// cache, charged as before the webhook).
func (a *applier) raises() bool {
	return a.mode == policy.ModeMemory && a.p.Spec.ContainerLimits == policy.RaiseLimits
}

// ownLimit returns the memory limit the pod gives container t, if any: a
// limit equal to the headroom this policy sets per container (its
// memory.level container) is the headroom, not a limit of the pod's own.
func (a *applier) ownLimit(t target) (resource.Quantity, bool) {
	lim, ok := t.c.Resources.Limits[corev1.ResourceMemory]
	headroom := a.p.Spec.Memory != nil && (a.p.Spec.Memory.Level == policy.LevelContainer ||
		a.p.Spec.Memory.Level == policy.LevelAuto && a.podLvl == PodLevelDropped)
	if !ok || headroom && lim.Cmp(a.p.MemoryLimit) == 0 {
		return resource.Quantity{}, false
	}
	return lim, true
}

// raisedBefore returns what the named container's memory limit was before
// an earlier pass raised it to lim, and that pass's record; nil when the
// record is not believed. The status annotation is the pod author's to
// write: a record is believed only for a container this policy selects
// (t), and only when it is exactly what this policy would have written
// there, its limit lim being what it was raised from plus add, the
// in-memory caches of this policy that t mounts. A believed record is one
// status.restoreLimits may restore.
func (a *applier) raisedBefore(t target, lim, add resource.Quantity) (resource.Quantity, *raisedLimit) {
	pr := a.prev.raised(t.c.Name)
	if pr == nil || add.IsZero() || !quantityIs(lim, pr.To) {
		return resource.Quantity{}, nil
	}
	q, ok := parseBounded(pr.From)
	if !ok {
		return resource.Quantity{}, nil
	}
	sum := q.DeepCopy()
	sum.Add(add)
	if sum.Cmp(lim) != 0 {
		return resource.Quantity{}, nil
	}
	if !slices.Contains(a.st.restorable, pr) {
		a.st.restorable = append(a.st.restorable, pr)
	}
	return q, pr
}

// cacheAdd is the sum of the sizeLimits of the policy's caches, as this
// mode injects them, and of its shm, that container t mounts as the policy
// mounts them: what they raise its limit by (containerLimits: raise).
func (a *applier) cacheAdd(t target) resource.Quantity {
	var add resource.Quantity
	for i, c := range a.p.Spec.Caches {
		vol := a.cacheVolume(i)
		if size := a.p.CacheSizes[i]; size != nil && a.injected(vol) &&
			slices.ContainsFunc(t.c.VolumeMounts, func(m corev1.VolumeMount) bool { return policyMount(&m, c.Name, c.MountPath, false) }) {
			add.Add(*size) // validation: with containerLimits raise, every cache has a sizeLimit
		}
	}
	if s := a.p.Spec.Shm; s != nil && a.injected(a.shmVolume()) &&
		slices.ContainsFunc(t.c.VolumeMounts, func(m corev1.VolumeMount) bool { return policyMount(&m, s.Name, policy.ShmPath, false) }) {
		add.Add(*a.p.ShmSize)
	}
	return add
}

// raiseLimit raises container t's own memory limit by the sizeLimits of the
// policy's in-memory caches it mounts (containerLimits: raise), and its
// request with it when the two were equal. A limit an earlier pass raised is
// recomputed from what it was, so a second pass changes nothing; one that a
// pod-level limit the pod author set could not hold is kept, with a warning.
func (a *applier) raiseLimit(t target) {
	lim, ok := a.ownLimit(t)
	if !ok || findContainer(&a.pod.Spec, t.c.Name) != t.c {
		return // no limit of its own, or a name the apiserver refuses twice
	}
	add := a.cacheAdd(t)
	if add.IsZero() {
		return
	}
	item := "limits/" + t.c.Name
	req, hasReq := t.c.Resources.Requests[corev1.ResourceMemory]
	// What the limit was before any raise: as it is, unless a policy of
	// this pass or an earlier pass raised it. A request the pod does not
	// set is the limit: the apiserver defaults it so before admission, and
	// will default it to the raised limit in dry-run's pod.
	rec := a.st.raised(t.c.Name)
	from, withReq := lim, !hasReq || req.Cmp(lim) == 0
	if rec == nil {
		if q, pr := a.raisedBefore(t, lim, add); pr != nil {
			from, withReq = q, pr.Request && (!hasReq || quantityIs(req, pr.To))
		}
	} else {
		withReq = rec.Request && withReq
	}
	to := lim.DeepCopy()
	if rec == nil {
		to = from.DeepCopy()
	}
	to.Add(add)
	if r := a.pod.Spec.Resources; r != nil {
		if pl, ok := r.Limits[corev1.ResourceMemory]; ok && to.Cmp(pl) > 0 && (a.prevMemory() == nil || !quantityIs(pl, a.prevMemory().Limit)) {
			a.skip(item, fmt.Sprintf("not raised: the pod-level memory limit (%s) is below the raised limit (%s); %s", pl.String(), to.String(),
				"the in-memory caches count against the container's limit"), true)
			return
		}
	}
	if lim.Cmp(to) != 0 || withReq && hasReq && req.Cmp(to) != 0 {
		t.c.Resources.Limits[corev1.ResourceMemory] = to
		if withReq && hasReq {
			t.c.Resources.Requests[corev1.ResourceMemory] = to.DeepCopy()
		}
		a.st.dirty = true
	}
	if rec == nil {
		rec = &raisedLimit{Container: t.c.Name, From: from.String(), Request: withReq}
		a.st.RaisedLimits = append(a.st.RaisedLimits, rec)
	}
	rec.To = to.String()
	a.applied(item)
}
