package mapexport

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// canonical returns pod as the apiserver hands it to admission: decoded and
// re-encoded, so quantities are in canonical form.
func canonical(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func asMap(t testing.TB, pod *corev1.Pod) map[string]any {
	t.Helper()
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	return m
}

func TestOfflineEquivalence(t *testing.T) {
	nsLabels := golden.NamespaceLabels(t)
	for _, set := range golden.Sets {
		t.Run(set.Name, func(t *testing.T) {
			var paths []string
			for _, p := range set.Policies {
				paths = append(paths, golden.Path(p))
			}
			ps, err := policy.Load(paths...)
			if err != nil {
				t.Fatal(err)
			}
			lm, _ := mutate.ParseLeakMitigation(set.LeakMitigation)
			exported, gaps, err := Export(ps, Options{LeakMitigation: lm})
			if err != nil {
				t.Fatal(err)
			}
			if len(gaps) > 0 {
				t.Skipf("gaps: %v", gaps)
			}
			for _, c := range golden.Cases(t) {
				if c.Set.Name != set.Name {
					continue
				}
				t.Run(c.Name, func(t *testing.T) {
					_, in := golden.Pod(t, c.Input)
					in = canonical(t, in)
					ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Namespace, Labels: nsLabels[in.Namespace]}}
					want := mutate.Pod(in, mutate.Namespace{Name: ns.Name, Labels: ns.Labels}, ps, mutate.Options{LeakMitigation: lm}).Pod
					got, err := Apply(context.Background(), exported, in, ns)
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(asMap(t, canonical(t, want)), asMap(t, canonical(t, got))); d != "" {
						t.Errorf("MAP result differs from the webhook's (-webhook +MAP):\n%s", d)
					}
					again, err := Apply(context.Background(), exported, got, ns)
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(asMap(t, canonical(t, got)), asMap(t, canonical(t, again))); d != "" {
						t.Errorf("a second run changes the pod (-first +second):\n%s", d)
					}
				})
			}
		})
	}
}
