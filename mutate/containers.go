package mutate

import (
	"fmt"
	"iter"

	corev1 "k8s.io/api/core/v1"
)

// ContainerRef places a container in its pod: the field of its list and
// its index there.
type ContainerRef struct {
	List  string // initContainers, containers or ephemeralContainers
	Index int
}

// Path is the container's field path: spec.containers[2].
func (r ContainerRef) Path() string { return fmt.Sprintf("spec.%s[%d]", r.List, r.Index) }

// Kind is what messages call the container: an init container, a container
// or an ephemeral container.
func (r ContainerRef) Kind() string { return containerKinds[r.List] }

var containerKinds = map[string]string{"initContainers": "init container", "containers": "container", "ephemeralContainers": "ephemeral container"}

// AllContainers yields every container of spec with its place, in pod
// order: init, app, then ephemeral containers. An ephemeral container is
// yielded as a Container, which the API gives the same fields.
func AllContainers(spec *corev1.PodSpec) iter.Seq2[ContainerRef, *corev1.Container] {
	return func(yield func(ContainerRef, *corev1.Container) bool) {
		for i := range spec.InitContainers {
			if !yield(ContainerRef{"initContainers", i}, &spec.InitContainers[i]) {
				return
			}
		}
		for i := range spec.Containers {
			if !yield(ContainerRef{"containers", i}, &spec.Containers[i]) {
				return
			}
		}
		for i := range spec.EphemeralContainers {
			if !yield(ContainerRef{"ephemeralContainers", i}, (*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon)) {
				return
			}
		}
	}
}

// PodContainers yields the init, then the app containers of spec: those a
// pod is created with.
func PodContainers(spec *corev1.PodSpec) iter.Seq[*corev1.Container] {
	return func(yield func(*corev1.Container) bool) {
		for ref, c := range AllContainers(spec) {
			if ref.List == "ephemeralContainers" || !yield(c) {
				return
			}
		}
	}
}
