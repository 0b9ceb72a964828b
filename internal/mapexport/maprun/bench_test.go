package maprun

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// BenchmarkRun measures one admission through the exported seed policy with
// the apiserver's MAP code: what a MAP costs the apiserver per pod.
func BenchmarkRun(b *testing.B) {
	for _, mode := range []string{"memory", "disk"} {
		b.Run(mode, func(b *testing.B) {
			exported, _, err := mapexport.Export(golden.Policies(b, "examples/policies/"+mode), mapexport.Options{})
			if err != nil {
				b.Fatal(err)
			}
			c, err := Compile(exported)
			if err != nil {
				b.Fatal(err)
			}
			_, pod := golden.Pod(b, "testdata/pods/basic.yaml")
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace, Labels: map[string]string{"kubernetes.io/metadata.name": pod.Namespace}}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Run(context.Background(), pod, ns); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
