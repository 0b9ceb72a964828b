package benchdata

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestInputs checks what the benchmarks claim about their inputs: the
// typical pod is about 5 KB, the large one has hundreds of env vars in many
// containers, every pod round-trips through the typed API unchanged (as the
// API server sends it), and the policy sets have the announced sizes with
// only the seed policy selecting the sandbox pods.
func TestInputs(t *testing.T) {
	for _, c := range Cases() {
		var pod corev1.Pod
		if err := json.Unmarshal(c.Pod, &pod); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		again, err := json.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(c.Pod) {
			t.Errorf("%s: not a typed encoding", c.Name)
		}
		env := 0
		for _, ctr := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			env += len(ctr.Env)
		}
		t.Logf("%s: %d bytes, %d containers, %d env vars, review %d bytes", c.Name, len(c.Pod),
			len(pod.Spec.InitContainers)+len(pod.Spec.Containers), env, len(Review(c.Pod)))
		switch c.Name {
		case "typical", "non-matching":
			if len(c.Pod) < 4000 || len(c.Pod) > 6500 {
				t.Errorf("%s: %d bytes, want about 5 KB", c.Name, len(c.Pod))
			}
		case "large":
			if env < 200 || len(pod.Spec.Containers) < 10 {
				t.Errorf("large: %d env vars in %d containers", env, len(pod.Spec.Containers))
			}
		}
	}
	for _, n := range []int{1, 10, 100} {
		set, err := PolicySet(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Policies) != n {
			t.Errorf("PolicySet(%d) has %d policies", n, len(set.Policies))
		}
	}
}
