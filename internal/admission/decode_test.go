package admission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// TestDecodePodAsTheDeserializer checks that decodePod accepts exactly the
// objects controller-runtime's decoder (the universal deserializer) decodes
// into a v1 Pod, and decodes them to the same pod: every corpus pod as the
// API server encodes it, and objects of every other apiVersion and kind
// spelling.
func TestDecodePodAsTheDeserializer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decoder := cradmission.NewDecoder(scheme)
	h := &Handler{}

	objects := map[string]string{
		"no apiVersion or kind":  `{"metadata":{"name":"p"}}`,
		"empty":                  `{}`,
		"kind only":              `{"kind":"Pod"}`,
		"apiVersion only":        `{"apiVersion":"v1"}`,
		"null apiVersion":        `{"apiVersion":null,"kind":"Pod"}`,
		"another version":        `{"apiVersion":"v2","kind":"Pod"}`,
		"another group":          `{"apiVersion":"apps/v1","kind":"Pod"}`,
		"group without version":  `{"apiVersion":"apps/","kind":"Pod"}`,
		"empty group":            `{"apiVersion":"/v1","kind":"Pod"}`,
		"bad apiVersion":         `{"apiVersion":"a/b/c","kind":"Pod"}`,
		"another kind":           `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`,
		"another kind, no group": `{"kind":"Service"}`,
		"kind in lower case":     `{"apiVersion":"v1","kind":"pod"}`,
		"unregistered kind":      `{"apiVersion":"v1","kind":"Frobnicator"}`,
		"apiVersion a number":    `{"apiVersion":1,"kind":"Pod"}`,
		"kind an object":         `{"apiVersion":"v1","kind":{}}`,
		"malformed spec":         `{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`,
		"not an object":          `"pod"`,
		"an array":               `[]`,
		"unknown fields":         `{"apiVersion":"v1","kind":"Pod","spec":{"x":1,"containers":[{"name":"a","y":[1]}]}}`,
		"duplicate kind":         `{"apiVersion":"v1","kind":"Service","kind":"Pod"}`,
		"integers kept":          `{"apiVersion":"v1","kind":"Pod","spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"a","resources":{"limits":{"memory":1073741824}}}]}}`,
	}
	for _, c := range golden.Cases(t) {
		_, pod := golden.Pod(t, c.Input)
		b, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		objects["corpus "+c.Name] = string(b)
	}
	for name, raw := range objects {
		t.Run(name, func(t *testing.T) {
			want := &corev1.Pod{}
			wantErr := decoder.DecodeRaw(runtime.RawExtension{Raw: []byte(raw)}, want)
			got, err := h.decodePod(runtime.RawExtension{Raw: []byte(raw)})
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("decodePod error %v, the deserializer's %v", err, wantErr)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("decodePod differs from the deserializer (-deserializer +decodePod):\n%s", d)
			}
		})
	}
}
