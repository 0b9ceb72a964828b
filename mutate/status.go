package mutate

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"

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

	dirty bool // the pod spec changed in this pass
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
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[StatusAnnotation] = v
	return true
}
