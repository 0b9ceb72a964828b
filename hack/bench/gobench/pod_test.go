package gobench

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// BenchmarkPod measures the core alone on the benchmark pods the handler and
// load benchmarks use, under 1, 10 and 100 policies of which one matches.
func BenchmarkPod(b *testing.B) {
	ns := mutate.Namespace{Name: benchdata.Namespace}
	pods := []struct {
		name string
		pod  *corev1.Pod
	}{{"typical", benchdata.TypicalPod()}, {"large", benchdata.LargePod()}, {"non-matching", benchdata.NonMatchingPod()}}
	for _, n := range []int{1, 10, 100} {
		set, err := benchdata.PolicySet(n)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pods {
			b.Run(fmt.Sprintf("%s/policies=%d", p.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					mutate.Pod(p.pod, ns, set, mutate.Options{})
				}
			})
		}
	}
}
