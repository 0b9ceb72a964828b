package mutate

import (
	"encoding/json"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// BenchmarkPatch is the cost of the JSONPatch of the benchmarks' typical
// sandbox pod (hack/bench/benchdata) under the seed policy, as the API
// server sends it (its typed encoding, managedFields included) and as a
// YAML file reads (keys sorted, no managedFields).
func BenchmarkPatch(b *testing.B) {
	y, err := os.ReadFile(testkit.Path("hack/bench/benchdata/typical.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(y, pod); err != nil {
		b.Fatal(err)
	}
	typed, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	fromYAML, err := yaml.YAMLToJSON(y)
	if err != nil {
		b.Fatal(err)
	}
	set := golden.Policies(b, "examples/policies/memory")
	for _, in := range []struct {
		name string
		raw  []byte
	}{{"apiserver", typed}, {"yaml", fromYAML}} {
		original := &corev1.Pod{}
		if err := json.Unmarshal(in.raw, original); err != nil {
			b.Fatal(err)
		}
		res := Pod(original, Namespace{Name: "sandboxes"}, set, Options{})
		if !res.Changed {
			b.Fatal("the seed policy does not change the typical pod")
		}
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Patch(in.raw, original, res.Pod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
