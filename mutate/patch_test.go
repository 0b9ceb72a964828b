package mutate

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	evanphx "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// wholeDocumentPatch is the patch as a diff of the whole pod makes it
// (wholePatch, then keepIntended), which Patch must give exactly.
func wholeDocumentPatch(t *testing.T, raw []byte, original, mutated *corev1.Pod) []jsonpatch.Operation {
	t.Helper()
	ops, err := wholePatch(raw, mutated)
	if err != nil {
		t.Fatal(err)
	}
	if ops, err = keepIntended(ops, original); err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestPatchEqualsWholeDocumentDiff checks that Patch makes the very
// operations of one diff of the whole pod, for every corpus pod under every
// policy set, sent three ways: as the API server encodes it (typed, with
// managedFields and a status), where Patch diffs part by part
// (typedPatch); as the YAML file reads (keys sorted, quantities as
// written); and with fields the compiled API does not know at every level
// and nulls.
func TestPatchEqualsWholeDocumentDiff(t *testing.T) {
	for _, c := range golden.Cases(t) {
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			js, pod := golden.Pod(t, c.Input)
			set := golden.Policies(t, c.Set.Policies...)
			lm, _ := ParseLeakMitigation(c.Set.LeakMitigation)
			ns := Namespace{Name: "default", Labels: golden.NamespaceLabels(t)[pod.Namespace]}
			if pod.Namespace != "" {
				ns.Name = pod.Namespace
			}

			typed := pod.DeepCopy()
			typed.ManagedFields = []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{}}}`),
			}}
			typed.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}
			apiServer, err := json.Marshal(typed)
			if err != nil {
				t.Fatal(err)
			}

			var hostile map[string]any
			if err := json.Unmarshal(js, &hostile); err != nil {
				t.Fatal(err)
			}
			hostile["unknownTop"] = map[string]any{"a": 1}
			hostile["status"] = map[string]any{"phase": "Running", "unknown": []any{1.5, "x"}}
			meta, _ := hostile["metadata"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
				hostile["metadata"] = meta
			}
			meta["unknown~/key"] = "v"
			meta["labels"] = nil
			spec, _ := hostile["spec"].(map[string]any)
			spec["unknownSpec"] = map[string]any{"deep": map[string]any{"deeper": []any{map[string]any{"x": nil}}}}
			spec["nodeSelector"] = nil
			for _, cs := range []string{"containers", "initContainers"} {
				list, _ := spec[cs].([]any)
				for _, ct := range list {
					ctr := ct.(map[string]any)
					ctr["unknownContainer"] = true
					if res, ok := ctr["resources"].(map[string]any); ok {
						res["unknownResources"] = map[string]any{"limits": map[string]any{"memory": "1Gi"}}
					} else {
						ctr["resources"] = map[string]any{}
					}
				}
			}
			hostileJS, err := json.Marshal(hostile)
			if err != nil {
				t.Fatal(err)
			}

			// As kubectl prints the pod the API server stores: the typed
			// encoding read back as generic values, members sorted.
			kubectl := testkit.SortedJSON(t, apiServer)
			// The patch, as encoded, of each input that takes the typed
			// way: the same bytes for the API server's encoding and
			// kubectl's, as dry-run shows the webhook's patch.
			encodedPatch := map[string]string{}

			for _, in := range []struct {
				name string
				raw  []byte
				// Patch and PatchResult take typedPatch's way
				typed, typedSorted bool
			}{
				{"yaml", js, false, sameJSONValue(t, js, pod)},
				{"apiserver", apiServer, true, true},
				{"kubectl", kubectl, false, true},
				{"hostile", hostileJS, false, false},
			} {
				t.Run(in.name, func(t *testing.T) {
					original := &corev1.Pod{}
					if err := json.Unmarshal(in.raw, original); err != nil {
						t.Fatal(err)
					}
					res := Pod(original, ns, set, Options{LeakMitigation: lm})
					if !res.Changed {
						return
					}
					if _, typed, err := typedPatch(in.raw, original, res.Pod, false); err != nil || typed != in.typed {
						t.Fatalf("typedPatch: typed = %v, %v; want %v", typed, err, in.typed)
					}
					if _, typed, err := typedPatch(in.raw, original, res.Pod, true); err != nil || typed != in.typedSorted {
						t.Fatalf("typedPatch, sorted: typed = %v, %v; want %v", typed, err, in.typedSorted)
					}
					want := wholeDocumentPatch(t, in.raw, original, res.Pod)
					if len(want) == 0 {
						want = nil
					}
					got, err := Patch(in.raw, original, res.Pod)
					if err != nil {
						t.Fatal(err)
					}
					withResult, result, err := PatchResult(in.raw, original, res.Pod)
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range []struct {
						name string
						ops  []jsonpatch.Operation
					}{{"Patch", got}, {"PatchResult", withResult}} {
						checkMarshalPatch(t, p.ops)
						if len(p.ops) == 0 {
							p.ops = nil
						}
						// The same operations, in the same order, with the
						// same values: typedPatch's added objects keep their
						// type's member order, CreatePatch's are sorted.
						if diff := cmp.Diff(asJSON(t, want), asJSON(t, p.ops)); diff != "" {
							t.Errorf("%s differs from the whole-document diff (-want +got):\n%s", p.name, diff)
						}
					}
					if in.typedSorted && result == nil {
						t.Errorf("PatchResult gave no result for a pod it diffed part by part")
					}
					if !in.typedSorted && result != nil {
						t.Errorf("PatchResult gave a result for a pod it diffed whole")
					}
					if result != nil {
						checkResult(t, in.raw, withResult, result)
					}
					if in.typedSorted && in.name != "yaml" {
						b, err := MarshalPatch(withResult)
						if err != nil {
							t.Fatal(err)
						}
						encodedPatch[in.name] = string(b)
					}
				})
			}
			if a, k := encodedPatch["apiserver"], encodedPatch["kubectl"]; a != k {
				t.Errorf("the patch of kubectl's form of the pod is not byte for byte the webhook's:\n%s\n%s", k, a)
			}
		})
	}
}

// sameJSONValue reports whether raw is, as a generic JSON value, the
// encoding of the pod it decodes to.
func sameJSONValue(t *testing.T, raw []byte, pod *corev1.Pod) bool {
	t.Helper()
	enc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return cmp.Equal(generic(t, raw), generic(t, enc))
}

// applyOps applies ops to raw as the API server does, with
// evanphx/json-patch; it also returns the patch, as encoded, for messages.
func applyOps(t *testing.T, raw []byte, ops []jsonpatch.Operation) (applied, patch []byte, err error) {
	t.Helper()
	b, err := MarshalPatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := evanphx.DecodePatch(b)
	if err != nil {
		t.Fatal(err)
	}
	applied, err = p.Apply(raw)
	return applied, b, err
}

// checkResult checks that applying ops to raw, as the API server does,
// gives result as a JSON value.
func checkResult(t *testing.T, raw []byte, ops []jsonpatch.Operation, result []byte) {
	t.Helper()
	applied, b, err := applyOps(t, raw, ops)
	if err != nil {
		t.Fatalf("the patch does not apply: %v\n%s", err, b)
	}
	if diff := cmp.Diff(generic(t, applied), generic(t, result)); diff != "" {
		t.Errorf("PatchResult's result differs from the patch applied (-applied +result):\n%s", diff)
	}
}

// asJSON is ops as generic JSON values, for comparing what they say rather
// than how their objects' members are ordered.
func asJSON(t *testing.T, ops []jsonpatch.Operation) any {
	t.Helper()
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkMarshalPatch checks that MarshalPatch encodes ops byte for byte as
// json.Marshal does.
func checkMarshalPatch(t *testing.T, ops []jsonpatch.Operation) {
	t.Helper()
	want, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MarshalPatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("MarshalPatch:\n%s\njson.Marshal:\n%s", got, want)
	}
}

// TestMarshalPatch: MarshalPatch encodes every kind of value as json.Marshal
// does, a nil value of an add or replace as null.
func TestMarshalPatch(t *testing.T) {
	checkMarshalPatch(t, []jsonpatch.Operation{
		jsonpatch.NewOperation("add", "/a~1b", nil),
		jsonpatch.NewOperation("replace", "/c", nil),
		jsonpatch.NewOperation("remove", "/d", nil),
		jsonpatch.NewOperation("add", "/e", json.RawMessage(` { "x" : [1, 2.50, "<&>"] } `)),
		jsonpatch.NewOperation("add", "/f", map[string]any{"z": 1, "a": []any{"<b>", nil, true}}),
		jsonpatch.NewOperation("replace", "/g\u2028", "line\u2028sep <script>"),
		jsonpatch.NewOperation("test", "/h", 1.5e300),
	})
	checkMarshalPatch(t, nil)
	checkMarshalPatch(t, []jsonpatch.Operation{})
}

// TestPatchAppliesToAnObjectThatLooksTyped: an object that starts as the
// typed encoding does (kind first) but is not it, here with a null
// container, gets a patch that applies to it: Patch proves byte for byte
// that raw is the encoding before it diffs part by part, since a typed
// diff would add members to the null.
func TestPatchAppliesToAnObjectThatLooksTyped(t *testing.T) {
	raw := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"sandboxes","labels":{"app":"sandbox"}},` +
		`"spec":{"containers":[null,{"name":"main","image":"python:3.12-slim"}]}}`)
	original := &corev1.Pod{}
	if err := json.Unmarshal(raw, original); err != nil {
		t.Fatal(err)
	}
	res := Pod(original, Namespace{Name: "sandboxes"}, golden.Policies(t, "examples/policies/memory"), Options{})
	if !res.Changed {
		t.Fatal("the seed policy changed nothing")
	}
	ops, err := Patch(raw, original, res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, b, err := applyOps(t, raw, ops); err != nil {
		t.Fatalf("the patch does not apply: %v\n%s", err, b)
	}
}

// TestPatchResultOnlyWhenNothingIsDropped: when Patch drops an operation of
// the typed diff (here the addition of an empty pod-level resources, which
// only a typed encoding writes), applying the patch does not give the
// encoding of the mutated pod, and PatchResult gives no result.
func TestPatchResultOnlyWhenNothingIsDropped(t *testing.T) {
	original := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "sandboxes"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "python:3.12-slim"}}},
	}
	raw, err := json.Marshal(original)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []struct {
		name string
		raw  []byte
	}{{"apiserver", raw}, {"kubectl", testkit.SortedJSON(t, raw)}} {
		t.Run(in.name, func(t *testing.T) {
			mutated := original.DeepCopy()
			mutated.Annotations = map[string]string{"sandbox": "yes"}
			ops, result, err := PatchResult(in.raw, original, mutated)
			if err != nil {
				t.Fatal(err)
			}
			if result == nil {
				t.Fatal("no result for a typed diff that dropped nothing")
			}
			checkResult(t, in.raw, ops, result)

			mutated.Spec.Resources = &corev1.ResourceRequirements{}
			ops, result, err = PatchResult(in.raw, original, mutated)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 1 || ops[0].Path != "/metadata/annotations" {
				t.Fatalf("ops = %v, want the annotations added and nothing else", asJSON(t, ops))
			}
			if result != nil {
				t.Errorf("a result although the addition of {} was dropped: %s", result)
			}
		})
	}
}

// TestDiffStringsIsCreatePatch: the diff of two string maps is the one
// jsonpatch.CreatePatch makes of their encodings, for maps that share keys
// with the same or another value, have keys of their own (added, removed),
// keys RFC 6901 escapes, and none.
func TestDiffStringsIsCreatePatch(t *testing.T) {
	keys := []string{"a", "sandbox-webhook.io/status", "x~y", "~1/~0", "", "é"}
	values := []string{"", "1", "true", `{"policies":[]}`}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				m[k] = values[rng.IntN(len(values))]
			}
		}
		return m
	}
	encode := func(m map[string]string) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range 500 {
		o, m := random(), random()
		a, b := encode(o), encode(m)
		want, err := jsonpatch.CreatePatch(a, b)
		if err != nil {
			t.Fatal(err)
		}
		for j := range want {
			want[j].Path = "/metadata/annotations" + want[j].Path
		}
		got := diffStrings(nil, o, m, "/metadata/annotations")
		sortOps(want)
		sortOps(got)
		if diff := cmp.Diff(asJSON(t, want), asJSON(t, got)); diff != "" {
			t.Fatalf("case %d: %s to %s: CreatePatch's diff (-) and diffStrings' (+):\n%s", i, a, b, diff)
		}
	}
}
