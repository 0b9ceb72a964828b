package maprun

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestReinvocation: a container another webhook adds after the MAP ran gets
// its mounts and env, and the pod-level request is recomputed, exactly as
// the webhook does when the apiserver reinvokes it.
func TestReinvocation(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			set := golden.Policies(t, "examples/policies/"+mode)
			exported, _, err := mapexport.Export(set, mapexport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := Compile(exported)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"basic", "requests-only", "init-and-sidecar", "pod-level-request-only", "memory-emptydirs"} {
				t.Run(name, func(t *testing.T) {
					_, in := golden.Pod(t, "testdata/pods/"+name+".yaml")
					in = canonical(t, in)
					ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Namespace, Labels: map[string]string{"kubernetes.io/metadata.name": in.Namespace}}}
					mns := mutate.Namespace{Name: ns.Name, Labels: ns.Labels}
					late := corev1.Container{Name: "late", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}}

					first := canonical(t, mutate.Pod(in, mns, set, mutate.Options{}).Pod)
					first.Spec.Containers = append(first.Spec.Containers, late)
					want := mutate.Pod(canonical(t, first), mns, set, mutate.Options{}).Pod

					got, err := compiled.Run(context.Background(), in, ns)
					if err != nil {
						t.Fatal(err)
					}
					got = canonical(t, got)
					got.Spec.Containers = append(got.Spec.Containers, late)
					if got, err = compiled.Run(context.Background(), canonical(t, got), ns); err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(asMap(t, canonical(t, want)), asMap(t, canonical(t, got))); d != "" {
						t.Errorf("after reinvocation (-webhook +MAP):\n%s", d)
					}
				})
			}
		})
	}
}
