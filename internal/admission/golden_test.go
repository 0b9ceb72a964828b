package admission

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestGoldenCorpus sends every corpus pod, under every policy set, through
// the webhook as an AdmissionReview. The returned patch, applied to the
// request's object the way the API server applies it, must yield exactly
// the golden pod that the dry-run CLI prints; admitting that pod again must
// need no patch. The CLI and the server cannot disagree.
func TestGoldenCorpus(t *testing.T) {
	nsLabels := golden.NamespaceLabels(t)
	fixtures := map[string]*fixture{}
	for _, c := range golden.Cases(t) {
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			f := fixtures[c.Set.Name]
			if f == nil {
				lm, ok := mutate.ParseLeakMitigation(c.Set.LeakMitigation)
				if !ok {
					t.Fatalf("leak mitigation %q", c.Set.LeakMitigation)
				}
				f = newFixture(t, golden.Policies(t, c.Set.Policies...), mutate.Options{LeakMitigation: lm})
				f.ns = nsLabels
				fixtures[c.Set.Name] = f
			}

			raw, pod := golden.Pod(t, c.Input)
			_, review := f.serveHTTP(t, reviewBody(t, newRequest(admissionv1.Create, pod.Namespace, raw)))
			if !review.Response.Allowed {
				t.Fatalf("not allowed: %+v", review.Response.Result)
			}
			patched := applyPatch(t, raw, *review.Response)

			want, err := os.ReadFile(testkit.Path(c.Output))
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := yaml.YAMLToJSON(want)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, patched, wantJSON) {
				gotYAML, _ := yaml.JSONToYAML(patched)
				t.Errorf("the patched pod differs from %s\n--- got\n%s\n--- want\n%s\n--- patch\n%s", c.Output, gotYAML, want, review.Response.Patch)
			}

			_, again := f.serveHTTP(t, reviewBody(t, newRequest(admissionv1.Create, pod.Namespace, patched)))
			if !again.Response.Allowed || len(again.Response.Patch) != 0 {
				t.Errorf("admitting the golden pod again: allowed=%v patch %s", again.Response.Allowed, again.Response.Patch)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestPatchNeverWritesTheNamespace: the namespace is the request's, and the
// mutation core never writes it into the pod, so the patch (a diff of the
// pod and the core's result) never touches it, whether the pod names its
// namespace as the API server sends it, names none, or names another. Every
// corpus pod under every policy set, the three ways.
func TestPatchNeverWritesTheNamespace(t *testing.T) {
	nsLabels := golden.NamespaceLabels(t)
	sets := map[string]*policy.Set{}
	changed := 0
	for _, c := range golden.Cases(t) {
		set := sets[c.Set.Name]
		if set == nil {
			set = golden.Policies(t, c.Set.Policies...)
			sets[c.Set.Name] = set
		}
		lm, ok := mutate.ParseLeakMitigation(c.Set.LeakMitigation)
		if !ok {
			t.Fatalf("leak mitigation %q", c.Set.LeakMitigation)
		}
		_, pod := golden.Pod(t, c.Input)
		ns := pod.Namespace
		for _, own := range []string{ns, "", "another"} {
			p := pod.DeepCopy()
			p.Namespace = own
			res := mutate.Pod(p, mutate.Namespace{Name: ns, Labels: nsLabels[ns]}, set, mutate.Options{LeakMitigation: lm})
			if res.Changed {
				changed++
			}
			if res.Pod.Namespace != own {
				t.Errorf("%s/%s: the pod naming namespace %q comes out naming %q", c.Set.Name, c.Name, own, res.Pod.Namespace)
			}
		}
	}
	if changed == 0 {
		t.Fatal("no corpus pod was changed: the test checks nothing")
	}
}
