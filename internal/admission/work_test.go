package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestCountWork counts the parts of the review's object and old object
// that cost memory to process, keys named twice and spelled with escapes
// included, as the decoder would read them.
func TestCountWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want Work
	}{{
		name: "every part",
		body: `{"request":{"uid":"u-1","object":{"spec":{
			"initContainers":[{"name":"i","env":[{"name":"A"}],"envFrom":[{}]}],
			"containers":[{"name":"a","volumeMounts":[{"name":"v"},{"name":"w"}],"volumeDevices":[{"name":"d"}]},{"name":"b"}],
			"ephemeralContainers":[{"name":"e","env":[]}],
			"volumes":[{"name":"v"},{"name":"w"},{"name":"d"}]}},
			"oldObject":{"spec":{"containers":[{"name":"a"}]}}}}`,
		want: Work{Containers: 5, Volumes: 3, Mounts: 3, Env: 2, UID: "u-1"},
	}, {
		name: "a key named twice counts twice",
		body: `{"request":{"object":{"spec":{"containers":[{}],"containers":[{},{}]}}}}`,
		want: Work{Containers: 3},
	}, {
		name: "escaped keys",
		body: `{"request":{"object":{"spec":{"contain\u0065rs":[{"\u0065nv":[{},{}]}]}}}}`,
		want: Work{Containers: 1, Env: 2},
	}, {
		name: "other places do not count",
		body: `{"request":{"object":{"metadata":{"containers":[{}]},"spec":{"x":{"containers":[{}]}}}},"containers":[{}]}`,
	}, {
		name: "not JSON",
		body: `{"request":{"object":{"spec":{"containers":[{},{}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := CountWork([]byte(tc.body))
			tc.want.Bytes = int64(len(tc.body))
			got.statuses, got.Objects, got.Scalars, got.StatusBytes = nil, 0, 0, 0
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CountWork = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// referenceCount counts the values of body with encoding/json's tokens,
// leaving out the object's and the old object's status, as CountWork does
// (a key named twice counts twice, as the decoder reads both), and strips
// the statuses through a generic decoding; ok is false when body is not
// JSON.
func referenceCount(body []byte) (objects, scalars int, stripped []byte, ok bool) {
	if !json.Valid(body) {
		return 0, 0, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object  bool
		wantKey bool
		key     string
	}
	var stack []frame
	// inStatus: the path is request, object or oldObject, status.
	inStatus := func() bool {
		return len(stack) >= 3 && stack[0].object && stack[0].key == "request" &&
			stack[1].object && (stack[1].key == "object" || stack[1].key == "oldObject") &&
			stack[2].object && stack[2].key == "status"
	}
	value := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if k, isKey := tok.(string); isKey {
				stack[n-1].key, stack[n-1].wantKey = k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if !inStatus() {
				objects++
			}
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: true})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			value()
		default:
			if !inStatus() {
				scalars++
			}
			value()
		}
	}
	var review any
	_ = decodeNumbers(body, &review)
	if r, _ := review.(map[string]any); r != nil {
		if req, _ := r["request"].(map[string]any); req != nil {
			for _, k := range []string{"object", "oldObject"} {
				if obj, _ := req[k].(map[string]any); obj != nil {
					if _, has := obj["status"]; has {
						obj["status"] = map[string]any{}
					}
				}
			}
		}
	}
	stripped, _ = json.Marshal(review)
	return objects, scalars, stripped, true
}

// decodeNumbers decodes body into v, numbers as json.Number.
func decodeNumbers(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return dec.Decode(v)
}

// TestCountWorkValues: CountWork counts every object, array and scalar of
// the review but those in the statuses, as decoding it does, and
// StripStatus leaves the review without them, and otherwise as it was.
func TestCountWorkValues(t *testing.T) {
	for _, body := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","args":["x","y",1,true,null]}]},"status":{"conditions":[{},{}],"phase":"Running"}},"oldObject":{"status":{}}}}`,
		`{"request":{"object":{"status":[1,2,3],"spec":{"x":[[[[]]]],"volumes":[{"name":"v"}]},"status":"twice"}}}`,
		`{ "request" : { "object" : { "st\u0061tus" : { "a" : [ 1 , 2 ] } , "spec" : { } } } , "x" : "y" }`,
		`{"request":{"userInfo":{"groups":["a","b"],"extra":{"k":["v"]}},"object":{"kind":"Pod"}}}`,
	} {
		got := CountWork([]byte(body))
		objects, scalars, want, ok := referenceCount([]byte(body))
		if !ok {
			t.Fatalf("not a JSON review: %s", body)
		}
		if got.Objects != objects || got.Scalars != scalars {
			t.Errorf("%s: %d objects and arrays, %d scalars; want %d and %d", body, got.Objects, got.Scalars, objects, scalars)
		}
		stripped := got.StripStatus([]byte(body))
		var a, b any
		if err := decodeNumbers(stripped, &a); err != nil {
			t.Errorf("%s: stripped to %s: %v", body, stripped, err)
			continue
		}
		_ = decodeNumbers(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: stripped to %s, want %s", body, stripped, want)
		}
	}
}

// TestStripStatusKeepsTheTypedEncoding: an empty status stays as it is,
// so a pod the API server sent stays byte for byte its typed encoding.
func TestStripStatusKeepsTheTypedEncoding(t *testing.T) {
	body := reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic")))
	w := CountWork(slices.Clone(body))
	if got := w.StripStatus(slices.Clone(body)); !bytes.Equal(got, body) {
		t.Errorf("StripStatus changed a review whose status is empty:\n%s\n%s", body, got)
	}
}

// TestPodsBeyondTheCapsAreRefused: a review whose pod has more containers,
// volumes, mounts or env entries than any pod that runs is refused with
// the count and the cap, code 422 and the review's uid, before it is
// decoded; a pod at every cap is admitted and mutated.
func TestPodsBeyondTheCapsAreRefused(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	tiny := func(containers, volumes, mountsPer, envPer int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"sandboxes","labels":{"app":"sandbox"}},"spec":{"containers":[`)
		for i := range containers {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"c%d","image":"i","env":[%s],"volumeMounts":[%s]}`, i,
				strings.TrimSuffix(strings.Repeat(`{"name":"E","value":"v"},`, envPer), ","),
				strings.TrimSuffix(strings.Repeat(`{"name":"v0","mountPath":"/m"},`, mountsPer), ","))
		}
		b.WriteString(`],"volumes":[`)
		for i := range volumes {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"v%d","emptyDir":{}}`, i)
		}
		b.WriteString(`]}}`)
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string // in the refusal; "" means admitted
	}{
		{"at every cap", tiny(MaxContainers, MaxVolumes, MaxMounts/MaxContainers, MaxEnv/MaxContainers), ""},
		{"containers", tiny(MaxContainers+1, 1, 0, 0), fmt.Sprintf("the pod has %d containers (init, app and ephemeral together), more than %d", MaxContainers+1, MaxContainers)},
		{"volumes", tiny(1, MaxVolumes+1, 0, 0), fmt.Sprintf("%d volumes, more than %d", MaxVolumes+1, MaxVolumes)},
		{"mounts", tiny(1, 1, MaxMounts+1, 0), fmt.Sprintf("%d volume mounts and devices, more than %d", MaxMounts+1, MaxMounts)},
		{"env", tiny(2, 1, 0, MaxEnv/2+1), fmt.Sprintf("%d env and envFrom entries, more than %d", MaxEnv+2, MaxEnv)},
		{"75,000 tiny containers", tiny(75000, 0, 0, 0), "75000 containers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(admissionv1.Create, "sandboxes", tc.raw)
			code, review := f.serveHTTP(t, reviewBody(t, req))
			if code != http.StatusOK || review.Response == nil {
				t.Fatalf("HTTP %d, %+v", code, review.Response)
			}
			r := review.Response
			if tc.want == "" {
				if !r.Allowed || len(r.Patch) == 0 {
					t.Errorf("a pod at every cap: allowed %v, %d bytes of patch, %+v", r.Allowed, len(r.Patch), r.Result)
				}
				return
			}
			if r.Allowed || r.Result == nil || r.Result.Code != http.StatusUnprocessableEntity || r.UID != req.UID ||
				!strings.Contains(r.Result.Message, tc.want) {
				t.Errorf("answered allowed=%v uid=%q %+v, want refused with code 422, the uid and %q", r.Allowed, r.UID, r.Result, tc.want)
			}
		})
	}
}

// TestPatchBound: a patch above MaxPatchBytes is refused, not returned.
func TestPatchBound(t *testing.T) {
	h := newFixture(t, nil, mutate.Options{}).handler
	original := &corev1.Pod{}
	raw, err := json.Marshal(original)
	if err != nil {
		t.Fatal(err)
	}
	mutated := original.DeepCopy()
	mutated.Annotations = map[string]string{"a": "x"}
	if b, err := h.patch(raw, original, mutated); err != nil || !strings.Contains(string(b), `"/metadata/annotations"`) {
		t.Fatalf("a small patch: %s, %v", b, err)
	}
	mutated.Annotations["a"] = strings.Repeat("x", MaxPatchBytes)
	if _, err := h.patch(raw, original, mutated); !errors.Is(err, errPatchTooLarge) {
		t.Errorf("a patch of more than %d bytes: %v, want refused", MaxPatchBytes, err)
	}
}

// FuzzCountWork: whatever the body, counting ends and never panics.
func FuzzCountWork(f *testing.F) {
	for _, s := range []string{
		`{"request":{"object":{"spec":{"containers":[{"env":[{}]}]}}}}`,
		`{"request":{"object":{"spec":{"containers":[}`, `{"request":{"object":{"spec":{"volumes":[1,}]}}}}`,
		`{"request":{"object":{"spec":{"containers":[{"env":[`, `{"request":`, `{"`, `{`, `[`, ``,
		`{"request":{"object":{"status":{"a":[1]},"spec":{}},"oldObject":{"status":[]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := CountWork(body)
		if w.Bytes != int64(len(body)) {
			t.Errorf("Bytes = %d for %d bytes", w.Bytes, len(body))
		}
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); w.notObject != (len(trimmed) == 0 || trimmed[0] != '{') {
			t.Fatalf("%q: notObject = %v", body, w.notObject)
		}
		objects, scalars, want, ok := referenceCount(body)
		if !ok || w.notObject {
			_ = w.StripStatus(slices.Clone(body)) // must not panic
			return
		}
		if w.Objects != objects || w.Scalars != scalars {
			t.Errorf("%q: %d objects and arrays, %d scalars; want %d and %d", body, w.Objects, w.Scalars, objects, scalars)
		}
		var a, b any
		if err := decodeNumbers(w.StripStatus(slices.Clone(body)), &a); err != nil {
			t.Fatalf("%q: stripped, not JSON: %v", body, err)
		}
		_ = decodeNumbers(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%q: stripped differs from the reference", body)
		}
	})
}
