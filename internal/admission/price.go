package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// Price is what a review asks the handler to hold while it decodes, mutates
// and patches the pod, counted in one look at the body before anything of
// it is decoded: its bytes and its JSON values. Values cost memory out of
// proportion to their bytes: an empty object of three bytes becomes a typed
// struct, a map when the patch is diffed, perhaps patch operations; 75,000
// tiny containers in a 3 MB review took 600 MB, a million empty status
// entries 3.3 GB.
type Price struct {
	// Bytes is the size of the review.
	Bytes int64
	// Elements counts the objects and nulls that are elements of an array:
	// a container may be one. Objects counts the other objects, Arrays the
	// arrays, Scalars the strings, numbers, booleans and the other nulls
	// (keys not included).
	Elements, Objects, Arrays, Scalars int
	// NotObject is set when the body is not a JSON object: no
	// AdmissionReview, and a body the decoder might read as YAML, which the
	// count does not price. Such a body is refused (RefuseNotObject).
	NotObject bool
	// object is where the request's object is in the body, [start, end),
	// when the count saw it: a JSON object, the one member "object" of the
	// one member "request" of the body. Zero otherwise.
	object span
}

// span is a part of a body: its bytes from start to end.
type span struct{ start, end int }

// in returns the part of body s spans, or nil when s is empty.
func (s span) in(body []byte) []byte {
	if s.end <= s.start || s.end > len(body) {
		return nil
	}
	return body[s.start:s.end:s.end]
}

// What each value costs to process beyond its bytes, measured as the heap a
// review of tens of thousands of such values allocates while it is answered
// (decoded, mutated, patched), per value, rounded up; TestPriceBoundsAllocation
// holds them to it for every array and map of a pod. The count does not see
// which array an element is in, so every element is priced as the
// costliest: a container, which the core copies and writes (10 KiB beyond
// the 5 KiB of any object). A null element is priced as one too: in an
// array of structs the decoder makes a zero struct of it.
const (
	costPerElement = 15 << 10
	costPerObject  = 5 << 10
	costPerArray   = 5 << 10
	costPerScalar  = 1536
	// costPerReview is what answering any review allocates however small:
	// the decoder's and encoder's state, the answer, the request's logger.
	costPerReview = 32 << 10
	// costPerByte is what a byte of the review costs besides itself: its
	// copies in the decoded pod, in the typed encodings and in the generic
	// documents a patch may be diffed from, and the buffers they grow in.
	costPerByte = 20
)

// Memory is the memory processing the review takes beyond its bytes.
func (w Price) Memory() int64 {
	return costPerReview + int64(w.Elements)*costPerElement + int64(w.Objects)*costPerObject +
		int64(w.Arrays)*costPerArray + int64(w.Scalars)*costPerScalar + w.Bytes*costPerByte
}

// String says what the review holds, for messages.
func (w Price) String() string {
	return fmt.Sprintf("%d bytes, %d objects or nulls in arrays, %d other objects, %d arrays, %d scalars",
		w.Bytes, w.Elements, w.Objects, w.Arrays, w.Scalars)
}

// PriceReview counts the values of an AdmissionReview body without decoding
// it, in one pass that keeps no state but its position, the byte before it,
// its depth and the two keys that lead to the request's object: no nesting
// makes it use memory. An object or null is an array element when "[" or
// "," comes before it (in an object, a key comes after ","). On the way it
// notes where the request's object is, which the webhook then decodes in
// place (see decodeReview). On a body that is not valid JSON it may
// miscount, which costs nothing: a body that is not a JSON object is
// refused (NotObject), and the decoder checks that an object is valid JSON
// before it allocates anything for it.
func PriceReview(body []byte) Price {
	w := Price{Bytes: int64(len(body))}
	i := len(body) - len(bytes.TrimLeft(body, space))
	if i == len(body) || body[i] != '{' {
		w.NotObject = true
		return w
	}
	var prev byte // the first byte of the value or token before
	var raw bool  // the value after this key is kept as its bytes
	// Where the request's object is: depth counts the open objects and
	// arrays; inRequest is set while the last key of the body's own
	// members was "request"; atObject while the value of the request's
	// "object" comes next; requests and objects count those keys, a span
	// being kept only for one of each, and none when a key of the body or
	// of its members holds an escape.
	var depth, requests, objects int
	var inRequest, atObject, escaped bool
	var object span
	for ; i < len(body); i++ {
		c := body[i]
		element := prev == '[' || prev == ','
		if atObject && c != ':' && !isSpace(c) {
			atObject = false
			if c == '{' {
				object.start = i
			}
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '}', ']':
			if depth--; depth == 2 && inRequest && object.start > 0 && object.end == 0 {
				object.end = i + 1
			}
		case '{':
			if raw && prev == ':' {
				// A managedFields entry's fieldsV1: the decoder keeps it
				// as raw bytes and the patch never reads it (mutate.Patch
				// leaves managedFields out of the diff), so it costs its
				// bytes, priced with the body's, however many objects it
				// spells.
				i = skipObject(body, i)
				w.Scalars++
				raw = false
				prev = c
				continue
			}
			depth++
			if element {
				w.Elements++
			} else {
				w.Objects++
			}
		case '[':
			depth++
			w.Arrays++
		case '"':
			start := i + 1
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
			next := i + 1
			for next < len(body) && isSpace(body[next]) {
				next++
			}
			if next >= len(body) || body[next] != ':' {
				w.Scalars++ // not a key
			} else {
				key := body[start:min(i, len(body))]
				raw = string(key) == "fieldsV1"
				// A key spelled with an escape may read as "request" or
				// "object" to the decoder: no span is kept.
				escaped = escaped || depth <= 2 && bytes.IndexByte(key, '\\') >= 0
				switch {
				case depth == 1:
					if inRequest = string(key) == "request"; inRequest {
						requests++
					}
				case depth == 2 && inRequest && string(key) == "object":
					objects++
					atObject = true
				}
			}
		case 'n':
			if element {
				w.Elements++
			} else {
				w.Scalars++
			}
			i += len("null") - 1
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 't', 'f':
			w.Scalars++
			for i+1 < len(body) && strings.IndexByte(",}]"+space, body[i+1]) < 0 {
				i++
			}
		}
		prev = c
	}
	if requests == 1 && objects == 1 && !escaped && object.end > 0 {
		w.object = object
	}
	return w
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// skipObject returns the index of the "}" that closes the object opening at
// body[i], or the last index when it is not closed: a depth and whether it
// is in a string are all it keeps.
func skipObject(body []byte, i int) int {
	depth := 0
	for ; i < len(body); i++ {
		switch body[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i
			}
		case '"':
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		}
	}
	return len(body) - 1
}

// space is JSON's whitespace.
const space = " \t\r\n"

// RefuseNotObject answers a body that is not a JSON object (Price.NotObject),
// unprocessed, with an errored admission.k8s.io/v1 review of code 400: an
// answer, so the API server refuses the pod whatever the failurePolicy.
func RefuseNotObject(w http.ResponseWriter) {
	writeRefusal(w, admissionv1.SchemeGroupVersion.String(), "", http.StatusBadRequest,
		"the body is not a JSON object; an AdmissionReview is sent as one")
}

// RefuseReview answers the review in body, unprocessed, with an errored
// review of code, carrying the request's uid and in the review's
// apiVersion: an answer, so the API server refuses the pod whatever the
// failurePolicy, as a property of the pod must be (a failed call would fail
// open under webhook.guard). It reports false, and writes nothing, when body
// is not a review it can answer (no request uid): the caller then answers
// with an HTTP error. Reading the uid decodes nothing else: encoding/json
// skips the other values without keeping them.
func RefuseReview(w http.ResponseWriter, body []byte, code int32, reason string) bool {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Request    *struct {
			UID types.UID `json:"uid"`
		} `json:"request"`
	}
	if json.Unmarshal(body, &head) != nil || head.Request == nil || head.Request.UID == "" {
		return false
	}
	version := admissionv1.SchemeGroupVersion.String()
	if head.APIVersion == admissionv1beta1.SchemeGroupVersion.String() {
		version = head.APIVersion
	}
	writeRefusal(w, version, head.Request.UID, code, reason)
	return true
}

func writeRefusal(w http.ResponseWriter, version string, uid types.UID, code int32, reason string) {
	resp := cradmission.Errored(code, errors.New("sandbox-webhook: "+reason))
	resp.UID = uid
	_ = writeReview(w, version, resp)
}

// The most of each part a pod may have. Kubernetes sets no such limits, but
// no pod that runs has come near them: sandbox pods have one to five
// containers, the sidecar-heaviest pods (mesh, logging, init chains) a few
// dozen, a handful of volumes each mounted once or twice, and tens of
// environment variables. Each cap is more than ten times those, and still
// keeps one pod's processing within a few MiB.
const (
	MaxContainers = 1000
	MaxVolumes    = 1000
	MaxMounts     = 10000
	MaxEnv        = 20000
)

// beyondCaps says which parts of the pods (the object and, in an update,
// the old object, together) are beyond their caps, or "".
func beyondCaps(pods ...*corev1.Pod) string {
	var containers, volumes, mounts, env int
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		volumes += len(pod.Spec.Volumes)
		for _, c := range mutate.AllContainers(&pod.Spec) {
			containers++
			mounts += len(c.VolumeMounts) + len(c.VolumeDevices)
			env += len(c.Env) + len(c.EnvFrom)
		}
	}
	var out []string
	for _, p := range []struct {
		what   string
		n, max int
	}{
		{"containers (init, app and ephemeral together)", containers, MaxContainers},
		{"volumes", volumes, MaxVolumes},
		{"volume mounts and devices", mounts, MaxMounts},
		{"env and envFrom entries", env, MaxEnv},
	} {
		if p.n > p.max {
			out = append(out, fmt.Sprintf("%d %s, more than %d", p.n, p.what, p.max))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "the pod has " + strings.Join(out, ", ") + ": no pod that runs has so many, and processing it would take memory the webhook keeps for other pods"
}
