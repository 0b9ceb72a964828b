package testkit

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodOption changes a pod SandboxPod makes.
type PodOption func(*corev1.Pod)

// SandboxPod returns the smallest sandbox pod, name in namespace ns: the
// app=sandbox label that the seed policy and the chart's objectSelector
// select, and one container, main, of image "i", without resources. opts
// then change it, in order.
func SandboxPod(ns, name string, opts ...PodOption) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "sandbox"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "i"}}},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

// Image sets the image of the pod's containers, and their command when
// command is not empty.
func Image(image string, command ...string) PodOption {
	return func(pod *corev1.Pod) {
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].Image = image
			if len(command) > 0 {
				pod.Spec.Containers[i].Command = slices.Clone(command)
			}
		}
	}
}
