package mutate_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// benchSet is the seed policy plus n-1 policies that never match the
// sandbox pods (other namespaces and labels), named so that they sort
// before and after it.
func benchSet(b *testing.B, n int) *policy.Set {
	b.Helper()
	set, err := policy.Load(golden.Path("examples/policies/memory"))
	if err != nil {
		b.Fatal(err)
	}
	var docs []string
	for i := 1; i < n; i++ {
		docs = append(docs, fmt.Sprintf(header+`metadata: {name: other-%03d}
spec:
  match:
    namespaces: ["team-%d-*"]
    podSelector: {matchLabels: {app: other-%d}}
  caches: [{name: cache-%d, mountPath: /cache/%d, sizeLimit: 1Gi}]
  env: [{name: OTHER_%d, value: x}]
  memory: {limit: 4Gi}
`, i, i, i, i, i, i))
	}
	if len(docs) == 0 {
		return set
	}
	others, err := policy.ParseSet("others.yaml", []byte(strings.Join(docs, "\n---\n")))
	if err != nil {
		b.Fatal(err)
	}
	all, err := policy.NewSet(append(others.Policies, set.Policies...))
	if err != nil {
		b.Fatal(err)
	}
	return all
}

// largePod has many containers with hundreds of env vars each.
func largePod() *corev1.Pod {
	p := sandboxPod()
	p.Spec.Containers = nil
	for c := 0; c < 20; c++ {
		ctr := corev1.Container{Name: fmt.Sprintf("c%d", c), Image: "i",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}
		for e := 0; e < 200; e++ {
			ctr.Env = append(ctr.Env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", e), Value: "value"})
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	return p
}

func BenchmarkPod(b *testing.B) {
	ns := mutate.Namespace{Name: "sandboxes"}
	_, typical := golden.Pod(b, "testdata/pods/init-and-sidecar.yaml")
	nonMatching := sandboxPod()
	nonMatching.Labels = map[string]string{"app": "web"}
	pods := []struct {
		name string
		pod  *corev1.Pod
	}{{"typical", typical}, {"large", largePod()}, {"non-matching", nonMatching}}
	for _, n := range []int{1, 10, 100} {
		set := benchSet(b, n)
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
