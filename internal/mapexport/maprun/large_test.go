package maprun

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestLargePod: a pod of 100 containers and 100 init containers (half of
// them sidecars), each with its own memory-backed volume, stays within the
// CEL cost limits the apiserver enforces (per expression and per
// admission) and gets the webhook's result, from a policy alone in its MAP
// and from a set's MAP, which converts in its last mutation.
func TestLargePod(t *testing.T) {
	for _, src := range []string{"examples/policies/disk", "internal/mapexport/testdata/policies/tmpfs"} {
		const n = 100
		set := golden.Policies(t, src)
		exported, _, _ := mapexport.Export(set, mapexport.Options{})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "sandboxes", Labels: map[string]string{"app": "sandbox"}}}
		always := corev1.ContainerRestartPolicyAlways
		for i := 0; i < n; i++ {
			c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", i+1))}},
				VolumeMounts: []corev1.VolumeMount{{Name: fmt.Sprintf("v%d", i), MountPath: fmt.Sprintf("/v%d", i)}}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
			ic := c
			ic.Name = fmt.Sprintf("i%d", i)
			if i%2 == 0 {
				ic.RestartPolicy = &always
			}
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, ic)
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i), VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "Memory"}}})
		}
		pod = canonical(t, pod)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandboxes", Labels: map[string]string{"kubernetes.io/metadata.name": "sandboxes"}}}
		c, err := Compile(exported)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := c.Run(context.Background(), pod, ns)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want := mutate.Pod(pod, mutate.Namespace{Name: ns.Name, Labels: ns.Labels}, set, mutate.Options{}).Pod
		if d := cmp.Diff(asMap(t, canonical(t, want)), asMap(t, canonical(t, got))); d != "" {
			t.Errorf("%s: the MAP result differs from the webhook's (-webhook +MAP):\n%s", src, d)
		}
	}
}
