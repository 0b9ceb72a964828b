package maprun

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
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

// offlineSets are the policy sets of the offline equivalence test: the
// golden corpus's, and mapexport's own, covering what those do not
// (selectors of every kind, container selection, override, container-level
// memory, policies contesting items, disk-mode policies around a
// memory-mode one converting the pod's tmpfs volumes after every policy).
func offlineSets() []golden.Set {
	sets := []golden.Set{
		{Name: "a-uv-cache", Policies: []string{"internal/mapexport/testdata/policies/a-uv-cache.yaml"}},
		{Name: "b-extra", Policies: []string{"internal/mapexport/testdata/policies/b-extra.yaml"}},
		{Name: "selectors", Policies: []string{"internal/mapexport/testdata/policies/selectors.yaml"}},
		{Name: "selectors-forced-memory", Policies: []string{"internal/mapexport/testdata/policies/selectors.yaml"}, LeakMitigation: "off"},
		{Name: "contest", Policies: []string{"internal/mapexport/testdata/policies/contest"}},
		{Name: "contest-forced-disk", Policies: []string{"internal/mapexport/testdata/policies/contest"}, LeakMitigation: "on"},
		{Name: "contest-and-selectors", Policies: []string{"internal/mapexport/testdata/policies/contest", "internal/mapexport/testdata/policies/selectors.yaml"}},
		{Name: "contest-tmpfs", Policies: []string{"internal/mapexport/testdata/policies/tmpfs"}},
		{Name: "contest-tmpfs-forced-disk", Policies: []string{"internal/mapexport/testdata/policies/tmpfs"}, LeakMitigation: "on"},
	}
	for _, s := range golden.Sets {
		if s.NoMAP == "" { // mapexport refuses it; cli's TestDryRunMAP checks the refusal
			sets = append(sets, s)
		}
	}
	return sets
}

// offlinePods are the corpus pods and mapexport's own.
func offlinePods(t *testing.T) []string {
	var pods []string
	for _, pattern := range []string{"testdata/pods/*.yaml", "internal/mapexport/testdata/pods/*.yaml"} {
		m, err := filepath.Glob(testkit.Path(pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("no pods in %s: %v", pattern, err)
		}
		pods = append(pods, m...)
	}
	return pods
}

// offlineNamespaces returns the labels of the corpus's namespaces and
// mapexport's.
func offlineNamespaces(t *testing.T) map[string]map[string]string {
	labels := golden.NamespaceLabels(t)
	raw, err := os.ReadFile(testkit.Path("internal/mapexport/testdata/namespaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.NamespaceList
	if err := yaml.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	for _, ns := range list.Items {
		labels[ns.Name] = map[string]string{"kubernetes.io/metadata.name": ns.Name}
		maps.Copy(labels[ns.Name], ns.Labels)
	}
	return labels
}

// TestOfflineEquivalence runs every pod through the exported policies with
// the apiserver's MAP code and through mutate.Pod: the pods must be equal,
// the status annotation included, and a second pass, the webhook's and the
// MAP's, must give the same pod and change nothing.
// The e2e suite proves the same against a real apiserver for the corpus.
func TestOfflineEquivalence(t *testing.T) {
	nsLabels := offlineNamespaces(t)
	pods := offlinePods(t)
	for _, set := range offlineSets() {
		t.Run(set.Name, func(t *testing.T) {
			ps := golden.Policies(t, set.Policies...)
			lm, _ := mutate.ParseLeakMitigation(set.LeakMitigation)
			exported, gaps, err := mapexport.Export(ps, mapexport.Options{LeakMitigation: lm})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gaps {
				// A shadow policy changes no pod: the pods are equal
				// without it.
				if g.What != "enforcement: shadow" {
					t.Fatalf("gap: %v", g)
				}
			}
			compiled, err := Compile(exported)
			if err != nil {
				t.Fatal(err)
			}
			mutated := 0
			for _, file := range pods {
				t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
					rel, _ := filepath.Rel(testkit.Root(), file)
					_, in := golden.Pod(t, rel)
					in = canonical(t, in)
					labels, ok := nsLabels[in.Namespace]
					if !ok {
						t.Fatalf("unknown namespace %s", in.Namespace)
					}
					ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Namespace, Labels: labels}}
					res := mutate.Pod(in, mutate.Namespace{Name: ns.Name, Labels: ns.Labels}, ps, mutate.Options{LeakMitigation: lm})
					if res.Changed {
						mutated++
					}
					got, err := compiled.Run(context.Background(), in, ns)
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(asMap(t, canonical(t, res.Pod)), asMap(t, canonical(t, got))); d != "" {
						t.Errorf("MAP result differs from the webhook's (-webhook +MAP):\n%s", d)
					}
					// A second pass (reinvocation) gives the webhook's
					// second pass, and both change nothing.
					again, err := compiled.Run(context.Background(), canonical(t, got), ns)
					if err != nil {
						t.Fatal(err)
					}
					second := mutate.Pod(canonical(t, res.Pod), mutate.Namespace{Name: ns.Name, Labels: ns.Labels}, ps, mutate.Options{LeakMitigation: lm})
					if d := cmp.Diff(asMap(t, canonical(t, second.Pod)), asMap(t, canonical(t, again))); d != "" {
						t.Errorf("second pass: the MAP's differs from the webhook's (-webhook +MAP):\n%s", d)
					}
					if second.Changed {
						t.Errorf("the webhook's second pass changes the pod: %s", second.Pod.Annotations[mutate.StatusAnnotation])
					}
					if d := cmp.Diff(asMap(t, canonical(t, got)), asMap(t, canonical(t, again))); d != "" {
						t.Errorf("a second run changes the pod (-first +second):\n%s", d)
					}
				})
			}
			if mutated == 0 {
				t.Errorf("the policies mutate none of the %d pods: the comparison proves nothing", len(pods))
			}
		})
	}
}
