package mutate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// memory sets the policy's memory headroom: pod-level, or per container
// where the policy or the apiserver says so.
func (a *applier) memory(sel []target) {
	if a.p.Spec.Memory == nil {
		return
	}
	if a.containerLevel() {
		a.item(func() { a.containerMemory(sel) })
		return
	}
	// Memory is one item whatever its level, claimed in policy order: a
	// pod-level request computed by one policy would not see container
	// requests another adds.
	if !a.claim("memory", "memory/pod") {
		return
	}
	a.podHeadroom = true
}

// podMemory sets the pod-level headroom this policy claimed (memory), once
// every policy has applied its other items: the request and limit are at
// least the containers' as any policy raised them.
func (a *applier) podMemory(sel []target) {
	if a.podHeadroom {
		a.item(a.headroom)
	}
}

// containerLevel reports whether the policy's memory goes to the
// containers: memory.level container, or auto where the apiserver drops
// pod-level resources.
func (a *applier) containerLevel() bool {
	lvl := a.p.Spec.Memory.Level
	return lvl == policy.LevelContainer || lvl == policy.LevelAuto && a.podLvl == PodLevelDropped
}

func (a *applier) headroom() {
	const item = "memory/pod"
	if a.podLvl == PodLevelDropped {
		// The apiserver would drop spec.resources without an error: the
		// pod would run with no headroom while the status said otherwise.
		a.skip(item, PodLevelDroppedReason, true)
		return
	}
	spec := &a.pod.Spec
	var lim, req resource.Quantity
	var hasLim, hasReq bool
	if spec.Resources != nil {
		lim, hasLim = spec.Resources.Limits[corev1.ResourceMemory]
		req, hasReq = spec.Resources.Requests[corev1.ResourceMemory]
	}
	// Values this webhook set in an earlier pass are recomputed (a container
	// may have been added since); values the pod author set are respected.
	// An earlier pass records the request as "" when it kept the author's.
	var ours bool
	if pm := a.prevMemory(); pm != nil && hasLim && quantityIs(lim, pm.Limit) {
		ours = pm.Request == "" || (hasReq && quantityIs(req, pm.Request))
		ours = ours && hasReq && a.couldHaveWritten(spec, lim, req, pm.Request == "")
	}
	if hasLim && !ours {
		a.skip(item, fmt.Sprintf("the pod sets its own pod-level memory limit (%s); kept", lim.String()), false)
		return
	}
	ownReq := hasReq && (!ours || a.prevMemory().Request == "")

	wantReq := ContainerMemoryRequest(spec)
	if a.p.MemoryRequest.Cmp(wantReq) > 0 {
		wantReq = a.p.MemoryRequest.DeepCopy()
	}
	if ownReq {
		wantReq = req // the pod author's own request
	}
	wantLim := a.p.MemoryLimit.DeepCopy()
	if m := maxContainerLimit(spec); m.Cmp(wantLim) > 0 {
		wantLim = m
	}
	if wantReq.Cmp(wantLim) > 0 {
		wantLim = wantReq.DeepCopy()
	}

	if !hasLim || !hasReq || lim.Cmp(wantLim) != 0 || req.Cmp(wantReq) != 0 {
		if spec.Resources == nil {
			spec.Resources = &corev1.ResourceRequirements{}
		}
		setIn(&spec.Resources.Limits, corev1.ResourceMemory, wantLim)
		setIn(&spec.Resources.Requests, corev1.ResourceMemory, wantReq)
		a.st.dirty = true
	}
	a.st.PodMemory = &podMemory{Limit: wantLim.String()}
	if !ownReq {
		a.st.PodMemory.Request = wantReq.String()
	}
	a.applied(item)
}

// couldHaveWritten reports whether the pod-level memory lim and req are
// what this policy could have written on this pod in an earlier pass: the
// status annotation is the pod author's to write, so its podMemory is
// believed only then. An earlier pass set the request to the policy's
// request or the containers' (which another webhook may have raised since),
// or kept the author's (ownReq), and the limit to the largest of the
// policy's limit, that request and a container's limit.
func (a *applier) couldHaveWritten(spec *corev1.PodSpec, lim, req resource.Quantity, ownReq bool) bool {
	if !ownReq && req.Cmp(a.p.MemoryRequest) != 0 {
		if c := ContainerMemoryRequest(spec); req.Cmp(a.p.MemoryRequest) < 0 || req.Cmp(c) > 0 {
			return false
		}
	}
	floor := a.p.MemoryLimit.DeepCopy()
	if req.Cmp(floor) > 0 {
		floor = req.DeepCopy()
	}
	switch lim.Cmp(floor) {
	case 0:
		return true
	case -1:
		return false
	}
	for c := range PodContainers(spec) {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(lim) == 0 {
			return true
		}
	}
	return false
}

// PodLevelDroppedReason is why a memory.level pod policy injects nothing on
// an apiserver that drops pod-level resources; the client sees it as a
// warning, short enough to reach kubectl whole (TestClusterDropWarningsFit).
const PodLevelDroppedReason = "this apiserver drops pod-level resources (Kubernetes before 1.34, or PodLevelResources gate off): " +
	"no headroom; use memory.level auto or container"

func (a *applier) prevMemory() *podMemory {
	if a.prev == nil {
		return nil
	}
	return a.prev.PodMemory
}

// containerMemory is the fallback for clusters without pod-level resources:
// every selected app container without a memory limit gets the headroom as
// its limit and an explicit request (so the request does not default to the
// limit).
func (a *applier) containerMemory(sel []target) {
	const item = "memory/containers"
	if !a.claim("memory", item) {
		return
	}
	// A pod that sets pod-level memory manages memory at the pod level, on
	// a cluster that supports it: container limits or requests added here
	// could exceed what it set.
	if r := a.pod.Spec.Resources; r != nil {
		_, hasLim := r.Limits[corev1.ResourceMemory]
		_, hasReq := r.Requests[corev1.ResourceMemory]
		if hasLim || hasReq {
			a.skip(item, "the pod sets its own pod-level memory; kept", false)
			return
		}
	}
	for _, t := range sel {
		if t.init {
			continue
		}
		r := &t.c.Resources
		if _, ok := r.Limits[corev1.ResourceMemory]; ok {
			continue
		}
		// A limit below the container's own request is invalid.
		lim := a.p.MemoryLimit.DeepCopy()
		if req, ok := r.Requests[corev1.ResourceMemory]; ok && req.Cmp(lim) > 0 {
			lim = req.DeepCopy()
		}
		setIn(&r.Limits, corev1.ResourceMemory, lim)
		if _, ok := r.Requests[corev1.ResourceMemory]; !ok {
			setIn(&r.Requests, corev1.ResourceMemory, a.p.MemoryRequest.DeepCopy())
		}
		a.st.dirty = true
	}
	a.applied(item)
}
