package mutate

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// applier applies one matching policy to a pod.
type applier struct {
	p      *policy.Policy
	mode   policy.Mode
	ns     Namespace
	prev   *status // the status annotation of an earlier pass, if any
	res    *Result
	shadow bool
	podLvl PodLevelResources
	imgVol ImageVolumes

	pod    *corev1.Pod
	claims map[string]string // "volume/x", "path/y", "env/z", "memory", "convert/x" → policy
	st     *status
	sp     *statusPolicy // also in st.Policies; convert adds to it later
	dirty  bool          // whether an item of this pass changed the pod

	podHeadroom bool // memory claimed for the pod level, set by podMemory
}

// target is a container the policy selected.
type target struct {
	c    *corev1.Container
	init bool
}

// kind is one kind of item a policy injects, a file of this package each:
// apply decides each of its items for the pod, through applier.item.
type kind struct {
	// field is the policy's spec field that declares the items.
	field string
	apply func(a *applier, sel []target)
	// last kinds apply after every policy's other kinds (finish): they
	// read what any policy gave the containers.
	last bool
}

// kinds are the item kinds in the order they apply. A later kind sees
// what an earlier one injected: an asset's source follows the runtime
// class, the mirrors rewrite the assets' images, containerLimits raises a limit by the
// caches and the shm a container mounts, and disk's warning counts the
// caches. memory is claimed in policy order, and its pod level set last,
// after every policy: the pod's request and limit are at least the
// containers' as any policy raised them.
var kinds = []kind{
	{field: "runtime", apply: (*applier).runtime},
	{field: "caches", apply: (*applier).caches},
	{field: "shm", apply: (*applier).shm},
	{field: "containerLimits", apply: (*applier).raiseLimits},
	{field: "assets", apply: (*applier).assets},
	{field: "imageMirrors", apply: (*applier).mirrors},
	{field: "disk", apply: (*applier).disk},
	{field: "env", apply: (*applier).envs},
	{field: "memory", apply: (*applier).memory},
	{field: "memory", apply: (*applier).podMemory, last: true},
}

func (a *applier) apply() {
	a.sp = &statusPolicy{Name: a.p.Name(), Hash: a.p.Hash, Mode: a.mode}
	sel := a.containers()
	// Each item starts clean, so that applied can tell an item the pod
	// already had from one that changed it; dirty collects them all.
	a.dirty = a.st.dirty
	for _, k := range kinds {
		if !k.last {
			k.apply(a, sel)
		}
	}
	a.st.dirty = a.dirty
	a.st.Policies = append(a.st.Policies, a.sp)
}

// finish applies the last kinds, once every policy has applied the others.
func (a *applier) finish() {
	sel := a.containers()
	a.dirty = a.st.dirty
	for _, k := range kinds {
		if k.last {
			k.apply(a, sel)
		}
	}
	a.st.dirty = a.dirty
}

// item decides one item with decide, from a clean status.dirty, so that
// applied tells an item the pod already had from one that changed it.
func (a *applier) item(decide func()) {
	a.st.dirty = false
	decide()
	a.dirty = a.dirty || a.st.dirty
}

// containers returns the containers the policy's container selector picks,
// init containers (and native sidecars) first, in pod order.
func (a *applier) containers() []target {
	cs := a.p.Spec.Containers
	picked := func(name string) bool {
		return firstGlob(cs.Include, name) != "" && firstGlob(cs.Exclude, name) == ""
	}
	var out []target
	if cs.InitContainers == nil || *cs.InitContainers {
		for i := range a.pod.Spec.InitContainers {
			if c := &a.pod.Spec.InitContainers[i]; picked(c.Name) {
				out = append(out, target{c: c, init: true})
			}
		}
	}
	for i := range a.pod.Spec.Containers {
		if c := &a.pod.Spec.Containers[i]; picked(c.Name) {
			out = append(out, target{c: c})
		}
	}
	return out
}

// claim gives key (an item, or "memory") to this policy unless an earlier
// policy has it; then item is skipped, with a warning, and claim is false.
func (a *applier) claim(key, item string) bool {
	if owner, ok := a.claims[key]; ok {
		a.skip(item, fmt.Sprintf("%s is claimed by policy %q, which applies first", key, owner), true)
		return false
	}
	a.claims[key] = a.p.Name()
	return true
}

func (a *applier) applied(item string) {
	a.sp.Injected = append(a.sp.Injected, item)
	a.res.Applied = append(a.res.Applied, Decision{Policy: a.p.Name(), Item: item, Shadow: a.shadow, Present: !a.st.dirty})
}

// deny refuses the pod for item, with reason; a shadow policy only reports
// that it would. The item is recorded as skipped either way.
func (a *applier) deny(item, reason string) {
	if a.shadow {
		a.skip(item, "would refuse the pod: "+reason, false)
		return
	}
	a.skip(item, "the pod is refused: "+reason, false)
	if a.res.Denied != "" {
		a.res.Denied += "; "
	}
	a.res.Denied += fmt.Sprintf("sandbox-webhook: policy %q: %s", a.p.Name(), reason)
}

func (a *applier) skip(item, reason string, warn bool) {
	a.sp.Skipped = append(a.sp.Skipped, item+": "+reason)
	a.res.Skipped = append(a.res.Skipped, Decision{Policy: a.p.Name(), Item: item, Reason: reason, Shadow: a.shadow})
	if warn {
		a.warn("%s: %s", item, reason)
	}
}

// warn adds a client-visible warning. Shadow policies only report.
func (a *applier) warn(format string, args ...any) {
	if a.shadow {
		return
	}
	msg := fmt.Sprintf("sandbox-webhook: policy %q: "+format, append([]any{a.p.Name()}, args...)...)
	if !slices.Contains(a.res.Warnings, msg) {
		a.res.Warnings = append(a.res.Warnings, msg)
	}
}
