package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// mapLabel scopes an exported MutatingAdmissionPolicy to its test's
// namespaces: the binding's namespaceSelector requires mapLabel=<scope>, the
// way instanceLabel scopes a webhook configuration.
const mapLabel = "e2e.sandbox-webhook.io/map"

// installMAP creates the exported policies and bindings, each binding
// narrowed to the namespaces labelled mapLabel=scope, and waits until the
// apiserver applies them to probe (a sandbox pod in such a namespace). They
// are deleted when the test ends.
func installMAP(t *testing.T, exported []mapexport.Exported, scope string, probe *corev1.Pod) {
	t.Helper()
	ctx := t.Context()
	api := suite.cs.AdmissionregistrationV1()
	for _, e := range exported {
		p, b := e.Policy.DeepCopy(), e.Binding.DeepCopy()
		p.Name += "-" + scope
		b.Name += "-" + scope
		b.Spec.PolicyName = p.Name
		b.Spec.MatchResources = &admissionregistrationv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{mapLabel: scope}},
		}
		if _, err := api.MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating MutatingAdmissionPolicy %s: %v", p.Name, err)
		}
		t.Cleanup(func() {
			if err := api.MutatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting MutatingAdmissionPolicy %s: %v", p.Name, err)
			}
		})
		if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating MutatingAdmissionPolicyBinding %s: %v", b.Name, err)
		}
		t.Cleanup(func() {
			if err := api.MutatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting MutatingAdmissionPolicyBinding %s: %v", b.Name, err)
			}
		})
	}
	if err := harness.WaitMutating(ctx, suite.cs, probe, true); err != nil {
		t.Fatal(err)
	}
}

// loadSet loads a policy set and returns it with the leak-mitigation
// override it runs under.
func loadSet(t *testing.T, set golden.Set) (*policy.Set, mutate.LeakMitigation) {
	t.Helper()
	ps := golden.Policies(t, set.Policies...)
	lm, ok := mutate.ParseLeakMitigation(set.LeakMitigation)
	if !ok {
		t.Fatalf("leak mitigation %q", set.LeakMitigation)
	}
	return ps, lm
}

// exportSet loads a golden policy set and exports it as the webhook runs it.
func exportSet(t *testing.T, set golden.Set) ([]mapexport.Exported, []mapexport.Gap) {
	t.Helper()
	ps, lm := loadSet(t, set)
	exported, gaps, err := mapexport.Export(ps, mapexport.Options{LeakMitigation: lm})
	if err != nil {
		t.Fatal(err)
	}
	return exported, gaps
}

// mapSets are policy sets of mapexport's own that the corpus pods also run
// under. They have no golden output: whether a pod must be mutated is what
// mutate.Pod says.
var mapSets = []golden.Set{
	// Two disk-mode policies with different keepMemoryVolumes around a
	// memory-mode one: the first to select a pod decides which of its
	// tmpfs volumes stay, after every policy has injected.
	{Name: "mapexport-tmpfs", Policies: []string{"internal/mapexport/testdata/policies/tmpfs"}},
}

// TestMAPEquivalence: for every pod of the golden corpus under every policy
// set (the example policies in both modes, the memory policy forced to disk,
// the hostPath-only asset, three policies contesting items, compiled into
// one MAP, whose shadow policy is not exported, and mapSets), the pod the
// apiserver stores with the exported MutatingAdmissionPolicy installed (and
// no webhook) equals, field for field, the pod it stores with the webhook
// installed (and no MAP): metadata.annotations, the status annotation
// included, spec and status, after dropping only what the server assigns per
// object (uid, resourceVersion, creationTimestamp, managedFields, the
// namespace, a generated name). A pod the webhook's result gets rejected
// (Pod Security) is rejected with the MAP too. The two act in separate
// namespaces, twins with the same labels, so they never see the same pod.
// A third twin has both, as during a migration: the MAP runs first, the
// webhook then finds its own result and changes nothing, and the pod is
// again the webhook's.
func TestMAPEquivalence(t *testing.T) {
	nsLabels := golden.NamespaceLabels(t)
	names := slices.Sorted(maps.Keys(nsLabels))
	cases := golden.Cases(t)
	for _, set := range append(slices.Clone(golden.Sets), mapSets...) {
		if set.NoMAP != "" {
			continue // mapexport refuses it; cli's TestDryRunMAP checks the refusal
		}
		t.Run(set.Name, func(t *testing.T) {
			exported, gaps := exportSet(t, set)
			// A corpus set's pods must be mutated as their golden
			// output is; mapSets run the corpus pods (those of the
			// first corpus set) and have mutate.Pod's say instead.
			corpus := slices.ContainsFunc(golden.Sets, func(s golden.Set) bool { return s.Name == set.Name })
			inputs := set.Name
			if !corpus {
				inputs = golden.Sets[0].Name
			}
			ps, lm := loadSet(t, set)
			expected := func(t *testing.T, c golden.Case, input *corev1.Pod) bool {
				if corpus {
					_, out := golden.Pod(t, c.Output)
					return harness.Mutated(out)
				}
				ns := mutate.Namespace{Name: input.Namespace, Labels: nsLabels[input.Namespace]}
				return harness.Mutated(mutate.Pod(input, ns, ps, mutate.Options{LeakMitigation: lm}).Pod)
			}
			for _, g := range gaps {
				// A shadow policy changes no pod: the partial export
				// (--allow-gaps) must still give the webhook's pods.
				if g.What != "enforcement: shadow" {
					t.Fatalf("export gap %v: only a shadow policy's is expected", g)
				}
				t.Logf("partial export: %v", g)
			}

			// Twin namespaces: same labels as the corpus's, one set
			// served by the webhook, the other by the MAP.
			scope := "mapeq-" + set.Name
			twin := func(ns, side string) string { return ns + "-" + set.Name + "-" + side }
			// A third twin is served by both, as during a migration:
			// the MAP runs first, and the webhook must find nothing
			// left to do.
			var whNamespaces []*corev1.Namespace
			for _, ns := range names {
				labels := maps.Clone(nsLabels[ns])
				delete(labels, "kubernetes.io/metadata.name")
				mapLabels := maps.Clone(labels)
				mapLabels[mapLabel] = scope
				whNamespaces = append(whNamespaces,
					&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: twin(ns, "wh"), Labels: labels}},
					&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: twin(ns, "both"), Labels: mapLabels}})
				ensureNamespace(t, twin(ns, "map"), mapLabels)
			}
			policies := map[string][]byte{}
			for _, p := range set.Policies {
				files, err := policyFiles(testkit.Path(p))
				if err != nil {
					t.Fatal(err)
				}
				maps.Copy(policies, files)
			}
			newInstance(t, scope, instanceOptions{
				policies:       policies,
				leakMitigation: set.LeakMitigation,
				namespaces:     whNamespaces,
			})
			installMAP(t, exported, scope, testkit.SandboxPod(twin("sandboxes", "map"), "probe", sleeping))
			t.Cleanup(func() {
				for _, ns := range names {
					for _, side := range []string{"wh", "map", "both"} {
						err := suite.cs.CoreV1().Pods(twin(ns, side)).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
						if err != nil {
							t.Errorf("deleting the pods in %s: %v", twin(ns, side), err)
						}
					}
				}
			})

			for _, c := range cases {
				if c.Set.Name != inputs {
					continue
				}
				t.Run(c.Name, func(t *testing.T) {
					_, input := golden.Pod(t, c.Input)
					viaWebhook, whErr := createIn(t, input, twin(input.Namespace, "wh"))
					viaMAP, mapErr := createIn(t, input, twin(input.Namespace, "map"))
					viaBoth, bothErr := createIn(t, input, twin(input.Namespace, "both"))
					switch {
					case whErr != nil || mapErr != nil || bothErr != nil:
						if !sameRejection(whErr, mapErr) || !sameRejection(whErr, bothErr) {
							t.Fatalf("outcomes differ\n  webhook: %v\n  MAP:     %v\n  both:    %v", whErr, mapErr, bothErr)
						}
						t.Logf("all rejected: %v", whErr)
					default:
						// Not vacuous: where the corpus expects a
						// mutation, both must have made it.
						if expected(t, c, input) && (!harness.Mutated(viaWebhook) || !harness.Mutated(viaMAP)) {
							t.Fatalf("the corpus expects a mutation: mutated by the webhook %v, by the MAP %v", harness.Mutated(viaWebhook), harness.Mutated(viaMAP))
						}
						if diff := cmp.Diff(comparable(viaWebhook), comparable(viaMAP)); diff != "" {
							t.Errorf("the pod stored with the MAP differs from the pod stored with the webhook (-webhook +MAP):\n%s", diff)
						}
						if diff := cmp.Diff(comparable(viaWebhook), comparable(viaBoth)); diff != "" {
							t.Errorf("the pod stored with the MAP and the webhook differs from the pod stored with the webhook alone (-webhook +both):\n%s", diff)
						}
					}
				})
			}
		})
	}
}

// createIn creates a copy of pod in namespace ns and returns it as stored.
func createIn(t *testing.T, pod *corev1.Pod, ns string) (*corev1.Pod, error) {
	t.Helper()
	p := pod.DeepCopy()
	p.Namespace = ns
	return suite.cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
}

// sameRejection reports whether both creates were rejected by Pod Security
// for the same violations, or by pod validation for the same causes (the
// messages name the namespace's level and the pod's violations, or the pod
// and its invalid fields, not the namespace).
func sameRejection(a, b error) bool {
	if a == nil || b == nil {
		return false
	}
	switch {
	case apierrors.IsForbidden(a) && apierrors.IsForbidden(b):
		violation := func(err error) string {
			_, v, _ := strings.Cut(err.Error(), "violates PodSecurity")
			return v
		}
		return violation(a) != "" && violation(a) == violation(b)
	case apierrors.IsInvalid(a) && apierrors.IsInvalid(b):
		// Pod validation, such as the mount of a volume the pod does
		// not declare (a hostile mount of a policy's volume): the
		// same causes, whatever the namespace.
		return a.Error() != "" && a.Error() == b.Error()
	}
	return false
}
