package predict

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func mem(s string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(s)}
}

// TestPodResourceProblems checks the apiserver rules dry-run --predict predicts.
func TestPodResourceProblems(t *testing.T) {
	cases := []struct {
		name string
		spec corev1.PodSpec
		want []string
	}{
		{"valid", corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Limits: mem("8Gi"), Requests: mem("1Gi")},
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: mem("1Gi"), Limits: mem("2Gi")}}},
		}, nil},
		{"container request above its limit", corev1.PodSpec{
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: mem("8G"), Limits: mem("4Gi")}}},
		}, []string{`container "a" memory request 8G exceeds its limit 4Gi`}},
		{"container limit above pod limit", corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Limits: mem("8Gi"), Requests: mem("0")},
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Limits: mem("16Gi"), Requests: mem("0")}}},
		}, []string{`container "a" memory limit 16Gi exceeds the pod-level limit 8Gi`}},
		{"pod request below containers (limit stands in for a missing request)", corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Limits: mem("8Gi"), Requests: mem("1Gi")},
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Limits: mem("2Gi")}}},
		}, []string{"pod-level memory request 1Gi is below the containers' aggregate request 2Gi"}},
		{"pod request above pod limit", corev1.PodSpec{
			Resources: &corev1.ResourceRequirements{Limits: mem("1Gi"), Requests: mem("2Gi")},
		}, []string{"pod-level memory request 2Gi exceeds the pod-level limit 1Gi"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PodResourceProblems(&c.spec)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	trap := corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: mem("8Gi")}, Containers: []corev1.Container{{Name: "a"}}}
	if !RequestDefaultsToLimit(&trap) {
		t.Error("a pod-level limit with no request anywhere must be reported")
	}
}
