package mutate

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// status is the value of StatusAnnotation. It describes the state the
// policies ensure, not what one pass changed, so a second pass writes the
// same bytes.
type status struct {
	Policies []*statusPolicy `json:"policies"`
	// Converted are the pod's own memory-backed emptyDirs moved to disk.
	Converted []string `json:"converted,omitempty"`
	// PodMemory is the pod-level memory this webhook set; a later pass
	// recognises it as its own and may recompute it.
	PodMemory *podMemory `json:"podMemory,omitempty"`
	// RaisedLimits are the container memory limits this webhook raised
	// (containerLimits: raise) and what they were; a later pass recognises
	// them as its own and recomputes them from what they were.
	RaisedLimits []*raisedLimit `json:"raisedLimits,omitempty"`

	dirty bool // the pod spec changed in this pass
	// restorable are the earlier pass's records this pass believed: each
	// for a container a policy selects, and exactly what that policy's
	// in-memory caches would have raised (see applier.raisedBefore).
	restorable []*raisedLimit
}

// raisedLimit is a container's memory limit raised by its caches.
type raisedLimit struct {
	Container string `json:"container"`
	From      string `json:"from"`
	To        string `json:"to"`
	// Request is set when the request, equal to the limit, was raised with
	// it.
	Request bool `json:"request,omitempty"`
}

// raised returns st's record of the named container's raised limit, or nil.
func (st *status) raised(container string) *raisedLimit {
	if st == nil {
		return nil
	}
	i := slices.IndexFunc(st.RaisedLimits, func(r *raisedLimit) bool { return r.Container == container })
	if i < 0 {
		return nil
	}
	return st.RaisedLimits[i]
}

// restoreLimits gives back their earlier value to the limits an earlier
// pass raised that no policy raised in this one (the policies changed), when
// they are still what that pass set and this pass believed the record.
func (st *status) restoreLimits(prev *status, pod *corev1.Pod) {
	for _, r := range prev.RaisedLimits {
		if st.raised(r.Container) != nil || !slices.Contains(st.restorable, r) {
			continue
		}
		c := findContainer(&pod.Spec, r.Container)
		if c == nil {
			continue
		}
		if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || !quantityIs(lim, r.To) {
			continue
		}
		from, err := resource.ParseQuantity(r.From)
		if err != nil {
			continue
		}
		c.Resources.Limits[corev1.ResourceMemory] = from
		if req, ok := c.Resources.Requests[corev1.ResourceMemory]; ok && r.Request && quantityIs(req, r.To) {
			c.Resources.Requests[corev1.ResourceMemory] = from.DeepCopy()
		}
		st.dirty = true
	}
}

// findContainer returns the container, init container or not, of that name.
func findContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	for c := range PodContainers(spec) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

type statusPolicy struct {
	Name     string      `json:"name"`
	Hash     string      `json:"hash"`
	Mode     policy.Mode `json:"mode"`
	Injected []string    `json:"injected,omitempty"`
	Skipped  []string    `json:"skipped,omitempty"`
}

type podMemory struct {
	Limit string `json:"limit"`
	// Request is empty when the pod author set the request.
	Request string `json:"request,omitempty"`
}

// readStatus returns the status annotation of an earlier pass, or nil.
func readStatus(pod *corev1.Pod) *status {
	raw, ok := pod.Annotations[StatusAnnotation]
	if !ok {
		return nil
	}
	var st status
	if json.Unmarshal([]byte(raw), &st) != nil {
		return nil
	}
	// What the pod author wrote is believed only where it is bounded and
	// could be this webhook's: an earlier pass records at most one raised
	// limit per container, and only quantities it parsed.
	if len(st.RaisedLimits) > len(pod.Spec.InitContainers)+len(pod.Spec.Containers) {
		st.RaisedLimits = nil
	}
	st.RaisedLimits = slices.DeleteFunc(st.RaisedLimits, func(r *raisedLimit) bool {
		if r == nil {
			return true
		}
		_, from := parseBounded(r.From)
		_, to := parseBounded(r.To)
		return !from || !to
	})
	if pm := st.PodMemory; pm != nil {
		_, lim := parseBounded(pm.Limit)
		_, req := parseBounded(pm.Request)
		if !lim || pm.Request != "" && !req {
			st.PodMemory = nil
		}
	}
	return &st
}

// carryConversions keeps volumes an earlier pass converted in the record, so
// the annotation stays the same on reinvocation.
func (st *status) carryConversions(prev *status, pod *corev1.Pod) {
	for _, n := range prev.Converted {
		onDisk := func(v corev1.Volume) bool {
			return v.Name == n && v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory
		}
		if !slices.Contains(st.Converted, n) && slices.ContainsFunc(pod.Spec.Volumes, onDisk) {
			st.Converted = append(st.Converted, n)
		}
	}
}

// write sets the annotation on pod and reports whether it changed.
func (st *status) write(pod *corev1.Pod) bool {
	b, _ := json.Marshal(st) // strings and slices of strings: cannot fail
	v := string(b)
	if pod.Annotations[StatusAnnotation] == v {
		return false
	}
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, StatusAnnotation, v)
	return true
}
