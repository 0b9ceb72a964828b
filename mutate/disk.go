package mutate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// disk gives the sandbox its ephemeral-storage budget: the first selected
// app container gets the policy's request and limit. Pod-level resources
// do not cover ephemeral storage; the kubelet evicts a pod whose writable
// layers, logs and disk-backed emptyDirs pass the sum of its containers'
// limits, and the scheduler places it by the sum of their requests, so one
// container carrying both makes them the pod's. A pod that sets
// ephemeral-storage in any container manages its own disk and keeps it.
func (a *applier) disk(sel []target) {
	if a.p.Spec.Disk == nil {
		return
	}
	a.item(func() { a.diskBudget(sel) })
}

func (a *applier) diskBudget(sel []target) {
	const item = "disk"
	if !a.claim(item, item) {
		return
	}
	var carrier *corev1.Container
	for _, t := range sel {
		if !t.init {
			carrier = t.c
			break
		}
	}
	if carrier == nil {
		a.skip(item, "no app container is selected", false)
		return
	}
	eph := corev1.ResourceEphemeralStorage
	owners := ephemeralStorageOwners(&a.pod.Spec)
	lim, hasLim := carrier.Resources.Limits[eph]
	req, hasReq := carrier.Resources.Requests[eph]
	switch {
	case len(owners) == 1 && owners[0] == carrier.Name && hasLim && hasReq &&
		lim.Cmp(a.p.DiskLimit) == 0 && req.Cmp(a.p.DiskRequest) == 0:
		// Already the policy's budget, and nobody else's.
	case len(owners) > 0:
		a.skip(item, fmt.Sprintf("container %q sets its own ephemeral-storage; the pod's disk is kept as it is", owners[0]), false)
		return
	default:
		setIn(&carrier.Resources.Limits, eph, a.p.DiskLimit.DeepCopy())
		setIn(&carrier.Resources.Requests, eph, a.p.DiskRequest.DeepCopy())
		a.st.dirty = true
	}
	a.warnCachesFillDisk()
	a.applied(item + "/" + carrier.Name)
}

// warnCachesFillDisk warns when the disk-backed caches this policy injected
// can fill the budget by themselves: they live in it.
func (a *applier) warnCachesFillDisk() {
	if a.mode != policy.ModeDisk {
		return // memory-backed caches are memory, not ephemeral storage
	}
	var sum resource.Quantity
	for i, c := range a.p.Spec.Caches {
		if !a.injected(a.cacheVolume(i)) {
			continue
		}
		size := a.p.CacheSizes[i]
		if size == nil {
			a.warn("disk: cache %q has no sizeLimit: on disk it can fill the whole budget (%s) and get the pod evicted", c.Name, a.p.DiskLimit.String())
			return
		}
		sum.Add(*size)
	}
	if sum.Cmp(a.p.DiskLimit) >= 0 {
		a.warn("disk: the caches on disk can take %s, the whole budget (%s): a sandbox that fills them is evicted", sum.String(), a.p.DiskLimit.String())
	}
}

// ephemeralStorageOwners names the init and app containers of spec, in pod
// order, that set an ephemeral-storage request or limit.
func ephemeralStorageOwners(spec *corev1.PodSpec) []string {
	var owners []string
	for c := range PodContainers(spec) {
		_, lim := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		_, req := c.Resources.Requests[corev1.ResourceEphemeralStorage]
		if lim || req {
			owners = append(owners, c.Name)
		}
	}
	return owners
}
