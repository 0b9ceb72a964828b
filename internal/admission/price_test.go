package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// referenceCount counts the values of body as PriceReview does, with
// encoding/json's tokens: the objects and nulls that are array elements,
// the other objects, the arrays, and the scalars (keys and the other nulls
// included in neither and in the scalars); ok is false when body is not
// JSON.
func referenceCount(body []byte) (w Price, ok bool) {
	if !json.Valid(body) {
		return w, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object, wantKey bool
		key             string // the last key of an object
	}
	var stack []frame
	// The request's object: its span, and how many times the body names
	// a request and the request an object.
	var object span
	var requests, objects int
	var escaped bool // a key of the body or of its members spelled with an escape
	defer func() {
		if requests == 1 && objects == 1 && !escaped {
			w.object = object
		}
	}()
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return w, true
		}
		n := len(stack)
		if key, isString := tok.(string); isString && n > 0 && stack[n-1].wantKey {
			stack[n-1].wantKey, stack[n-1].key = false, key // a key
			escaped = escaped || n <= 2 && bytes.IndexByte(body[before:dec.InputOffset()], '\\') >= 0
			switch {
			case n == 1 && key == "request":
				requests++
			case n == 2 && stack[0].key == "request" && key == "object":
				objects++
			}
			continue
		}
		inArray := n > 0 && !stack[n-1].object
		atObject := n == 2 && stack[0].key == "request" && stack[1].key == "object" && stack[1].object
		switch tok {
		case json.Delim('{'):
			if inArray {
				w.Elements++
			} else {
				w.Objects++
			}
			if atObject {
				object.start = int(dec.InputOffset()) - 1
			}
			stack = append(stack, frame{object: true, wantKey: true})
			continue
		case json.Delim('['):
			w.Arrays++
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:n-1]
			if n == 3 && stack[0].key == "request" && stack[1].key == "object" && tok == json.Delim('}') {
				object.end = int(dec.InputOffset())
			}
		case nil:
			if inArray {
				w.Elements++
			} else {
				w.Scalars++
			}
		default:
			w.Scalars++
		}
		// A value ended: in an object, a key comes next.
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
}

// TestPriceReview: PriceReview counts every object, array and scalar of the
// review as encoding/json reads them, whatever its strings hold, and
// refuses a body that is not a JSON object.
func TestPriceReview(t *testing.T) {
	for _, body := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","args":["x","y",1,true,null]}]},"status":{"conditions":[{},{}],"phase":"Running"}},"oldObject":{"status":{}}}}`,
		`{"request":{"object":{"status":[1,2,3],"spec":{"x":[[[[]]]],"volumes":[{"name":"v"}]},"status":"twice"}}}`,
		`{ "request" : { "object" : { "st\u0061tus" : { "a" : [ -1.5e3 , 2 ] } , "spec" : { } } } , "x" : "y" }`,
		`{"a":"{[\"x\":1,]}","b\\":"\\","c":["\"", ":", "]"],"d":{"e":"f"} ,"g" :false}`,
		`{"request":{"userInfo":{"groups":["a","b"],"extra":{"k":["v"]}},"object":{"kind":"Pod"}}}`,
		`{"a":[null, {}, null ,{"b":null,"c":[{}]}],"d":null,"e":[[{}],[null]] , "f" : [ 1 , { } ] }`,
	} {
		got := PriceReview([]byte(body))
		want, ok := referenceCount([]byte(body))
		if !ok {
			t.Fatalf("not JSON: %s", body)
		}
		if want.Bytes = int64(len(body)); got != want {
			t.Errorf("%s: %s; want %s", body, got, want)
		}
		if got.NotObject {
			t.Errorf("%s: not taken for an object", body)
		}
	}
	for _, body := range []string{``, ` `, `[{}]`, `"x"`, "apiVersion: v1\nkind: AdmissionReview\n"} {
		if !PriceReview([]byte(body)).NotObject {
			t.Errorf("%q: taken for an object", body)
		}
	}
}

// TestPriceReviewFindsTheObject: the count notes where the request's object
// is when the body names one request with one object, and nowhere else.
func TestPriceReviewFindsTheObject(t *testing.T) {
	for body, want := range map[string]string{
		`{"request":{"object":{"kind":"Pod"}}}`: `{"kind":"Pod"}`,
		`{ "kind" : "AdmissionReview" , "request" : { "uid" : "u" , "object" : { "a" : [ {}, "}" ] } , "oldObject" : null } }`: `{ "a" : [ {}, "}" ] }`,
		`{"request":{"object":{"metadata":{"managedFields":[{"fieldsV1":{"f:spec":{}}}]}},"oldObject":{"x":1}}}`:               `{"metadata":{"managedFields":[{"fieldsV1":{"f:spec":{}}}]}}`,
		`{"response":{"object":{"a":1}},"request":{"oldObject":{},"object":{"b":"\"object\":"}}}`:                              `{"b":"\"object\":"}`,
		`{"request":{"object":null}}`:                       ``,
		`{"request":{"object":"pod"}}`:                      ``,
		`{"request":{"object":[{}]}}`:                       ``,
		`{"request":{"object":{}},"request":{"object":{}}}`: ``,
		`{"request":{"object":{},"object":{}}}`:             ``,
		`{"request":{"spec":{"object":{}}}}`:                ``,
		`{"object":{},"request":{}}`:                        ``,
		`{"request":{"obj\u0065ct":{}}}`:                    ``,
		`{"request":{"object":{},"\u0078":1}}`:              ``,
		`{"request":{"object":{"\u0078":1}}}`:               `{"\u0078":1}`,
		`{"request":{"object":{"a":[1}`:                     ``,
	} {
		if got := string(PriceReview([]byte(body)).object.in([]byte(body))); got != want {
			t.Errorf("%s: the object is %q, want %q", body, got, want)
		}
	}
}

// TestPodsBeyondTheCapsAreRefused: a review whose pod has more containers,
// volumes, mounts or env entries than any pod that runs is refused with
// the count and the cap, code 422 and the review's uid, before the core
// sees it; a pod at every cap is admitted and mutated. (A pod far beyond
// them is priced beyond the request budget and never decoded:
// TestPodPartsCountAgainstTheBudget.)
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

// FuzzPriceReview: whatever the body, counting ends, never panics, and
// counts a JSON object's values as encoding/json reads them.
func FuzzPriceReview(f *testing.F) {
	for _, s := range []string{
		`{"request":{"object":{"spec":{"containers":[{"env":[{}]}]}}}}`,
		`{"request":{"object":{"spec":{"containers":[}`, `{"request":{"object":{"spec":{"volumes":[1,}]}}}}`,
		`{"request":{"object":{"spec":{"containers":[{"env":[`, `{"request":`, `{"`, `{`, `[`, ``,
		`{"a":"\\\"{","b" : [true,null,-0.5E+2]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := PriceReview(body)
		if w.Bytes != int64(len(body)) {
			t.Errorf("Bytes = %d for %d bytes", w.Bytes, len(body))
		}
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); w.NotObject != (len(trimmed) == 0 || trimmed[0] != '{') {
			t.Fatalf("%q: NotObject = %v", body, w.NotObject)
		}
		want, ok := referenceCount(body)
		if want.Bytes = int64(len(body)); ok && !w.NotObject && w != want {
			t.Errorf("%q: %s; want %s", body, w, want)
		}
	})
}

// TestRefuseReview: a refusal of the review in body carries its uid and
// apiVersion, so the API server takes it as the answer; a body with no
// request uid is not answered.
func TestRefuseReview(t *testing.T) {
	for _, c := range []struct{ body, version, uid string }{
		{`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","object":{"spec":{}}}}`, "admission.k8s.io/v1", "u1"},
		{`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u2"}}`, "admission.k8s.io/v1beta1", "u2"},
		{`{"apiVersion":"admission.k8s.io/v2","request":{"uid":"u3"}}`, "admission.k8s.io/v1", "u3"},
		{`{"apiVersion":"admission.k8s.io/v1","request":{}}`, "", ""},
		{`{"apiVersion":"admission.k8s.io/v1"}`, "", ""},
		{`{"request":{"uid":`, "", ""},
	} {
		w := httptest.NewRecorder()
		ok := RefuseReview(w, []byte(c.body), http.StatusRequestEntityTooLarge, "too much")
		if ok != (c.uid != "") {
			t.Errorf("%s: answered %v", c.body, ok)
			continue
		}
		if !ok {
			if w.Body.Len() != 0 {
				t.Errorf("%s: wrote %q without answering", c.body, w.Body.String())
			}
			continue
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("%s: %v %q", c.body, err, w.Body.String())
		}
		r := review.Response
		if review.APIVersion != c.version || string(r.UID) != c.uid || r.Allowed || r.Result == nil ||
			r.Result.Code != http.StatusRequestEntityTooLarge || r.Result.Message != "sandbox-webhook: too much" {
			t.Errorf("%s: answered %s", c.body, w.Body.String())
		}
	}
}
