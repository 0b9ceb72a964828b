package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Work is what a review asks the handler to hold while it decodes, mutates
// and patches the pod: its bytes, and the parts that cost memory out of
// proportion to their bytes. Every JSON value of the review counts (an
// empty object of three bytes becomes a typed struct, a map when the patch
// is diffed, perhaps patch operations), and the pod's containers, volumes,
// mounts and env entries, which the core copies and writes, count again:
// 75,000 tiny containers in a 3 MB review took 600 MB, a million empty
// status entries 3.3 GB. The status of the review's object and old object
// is left out: the handler never reads it, and CountWork records where it
// is so that StripStatus can take it out before anything is decoded.
type Work struct {
	// Bytes is the size of the review.
	Bytes int64
	// Containers counts init, app and ephemeral containers.
	Containers int
	// Volumes counts the pod's volumes.
	Volumes int
	// Mounts counts the containers' volumeMounts and volumeDevices.
	Mounts int
	// Env counts the containers' env and envFrom entries.
	Env int
	// Objects counts the review's objects and arrays, and Scalars its
	// strings, numbers, booleans and nulls (keys not included), outside
	// the statuses.
	Objects, Scalars int
	// StatusBytes is the size of the statuses StripStatus takes out:
	// bytes never decoded.
	StatusBytes int64
	// UID is the review's request uid, for an answer the API server takes.
	UID string

	// notObject is set when the body is not a JSON object: no
	// AdmissionReview, and a body the decoder might read as YAML, which the
	// count does not price.
	notObject bool
	// statuses are the offsets of the object's and old object's status
	// values in the body, for StripStatus.
	statuses [][2]int
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

// What each part costs to process beyond its bytes, measured as the heap a
// review of tens of thousands of such parts allocates while it is answered
// (decoded, mutated, patched), per part, rounded up; TestWorkCostBoundsAllocation
// holds them to it for every array and map of a pod. A part counts as an
// object or scalar too, so the costs of the four named parts are what they
// take beyond any object.
const (
	costPerContainer = 10 << 10
	costPerVolume    = 3 << 10
	costPerMount     = 1536
	costPerEnv       = 512
	costPerObject    = 5 << 10
	costPerScalar    = 1536
	// costPerReview is what answering any review allocates however small:
	// the decoder's and encoder's state, the answer, the request's logger.
	costPerReview = 32 << 10
	// costPerByte is what a byte of the review costs besides itself: its
	// copies in the decoded pod, in the typed encodings and in the generic
	// documents a patch may be diffed from, and the buffers they grow in.
	costPerByte = 20
)

// Cost is the review's bytes plus an upper estimate of the memory its
// parts take to process beyond their bytes.
func (w Work) Cost() int64 {
	return w.Bytes + w.PartsCost()
}

// PartsCost is the memory processing the review takes beyond its bytes.
func (w Work) PartsCost() int64 {
	return costPerReview + int64(w.Containers)*costPerContainer + int64(w.Volumes)*costPerVolume +
		int64(w.Mounts)*costPerMount + int64(w.Env)*costPerEnv +
		int64(w.Objects)*costPerObject + int64(w.Scalars)*costPerScalar + (w.Bytes-w.StatusBytes)*costPerByte
}

// String says what the review holds, for messages.
func (w Work) String() string {
	return fmt.Sprintf("%d bytes, %d containers, %d volumes, %d mounts, %d env entries, %d objects and arrays, %d scalars",
		w.Bytes, w.Containers, w.Volumes, w.Mounts, w.Env, w.Objects, w.Scalars)
}

// Excess says which part of the pod is beyond its cap, or "".
func (w Work) Excess() string {
	var out []string
	for _, p := range []struct {
		what   string
		n, max int
	}{
		{"containers (init, app and ephemeral together)", w.Containers, MaxContainers},
		{"volumes", w.Volumes, MaxVolumes},
		{"volume mounts and devices", w.Mounts, MaxMounts},
		{"env and envFrom entries", w.Env, MaxEnv},
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

// CountWork counts the work in an AdmissionReview body without decoding it.
// The scan reads valid JSON; on a body that is not, it may stop early or
// miscount, which costs nothing: a body that is not a JSON object is refused
// (see Refusal), and the decoder checks that an object is valid JSON before
// it allocates anything for it.
func CountWork(body []byte) (w Work) {
	w = Work{Bytes: int64(len(body))}
	defer func() {
		// The scanner indexes past the end of a truncated body.
		if recover() != nil {
			w = Work{Bytes: int64(len(body))}
		}
	}()
	s := scanner{b: body}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		w.notObject = true
		return w
	}
	w.Objects++
	s.members(func(key []byte) {
		if string(key) != "request" || s.b[s.i] != '{' {
			s.count(&w)
			return
		}
		w.Objects++
		s.members(func(key []byte) {
			switch {
			case string(key) == "uid" && s.b[s.i] == '"':
				start := s.i
				s.count(&w)
				_ = json.Unmarshal(s.b[start:s.i], &w.UID)
			case (string(key) == "object" || string(key) == "oldObject") && s.b[s.i] == '{':
				w.Objects++
				s.members(func(key []byte) {
					switch {
					case string(key) == "status":
						start := s.i
						s.value()
						w.statuses = append(w.statuses, [2]int{start, s.i})
						w.StatusBytes += int64(s.i - start)
					case string(key) == "spec" && s.b[s.i] == '{':
						s.countSpec(&w)
					default:
						s.count(&w)
					}
				})
			default:
				s.count(&w)
			}
		})
	})
	return w
}

// countSpec counts the pod spec at s.i.
func (s *scanner) countSpec(w *Work) {
	w.Objects++
	s.members(func(key []byte) {
		switch string(key) {
		case "containers", "initContainers", "ephemeralContainers":
			s.elements(w, func() {
				w.Containers++
				if s.b[s.i] != '{' {
					s.count(w)
					return
				}
				w.Objects++
				s.members(func(key []byte) {
					switch string(key) {
					case "env", "envFrom":
						w.Env += s.elements(w, func() { s.count(w) })
					case "volumeMounts", "volumeDevices":
						w.Mounts += s.elements(w, func() { s.count(w) })
					default:
						s.count(w)
					}
				})
			})
		case "volumes":
			w.Volumes += s.elements(w, func() { s.count(w) })
		default:
			s.count(w)
		}
	})
}

// StripStatus takes the status of the review's object and old object out of
// body, in place, leaving an empty object where each was, and returns what
// is left of body. Nothing reads a pod's status: the API server resets it
// at a CREATE, and an ephemeral container's mounts do not depend on it.
// Decoding it would cost memory the count leaves out. An empty status, as
// the API server sends it, stays as it is, so a pod in the typed encoding
// is still in it.
//
// A body that is not valid JSON is left as it is, to be refused by the
// decoder: the scan's offsets hold only for valid JSON, and taking a part
// out of invalid JSON could leave valid JSON the scan did not count.
func (w *Work) StripStatus(body []byte) []byte {
	statuses := w.statuses
	w.statuses = nil
	if !slices.ContainsFunc(statuses, func(st [2]int) bool { return st[1]-st[0] != 2 }) || !json.Valid(body) {
		return body
	}
	removed := 0
	for _, st := range statuses {
		start, end := st[0]-removed, st[1]-removed
		if string(body[start:end]) == "{}" {
			continue
		}
		copy(body[start:], "{}")
		n := copy(body[start+2:], body[end:])
		removed += end - start - 2
		body = body[:start+2+n]
	}
	return body
}

// members walks the object at s.i (valid JSON), calling member with each
// key, unescaped, and the scanner at its value, which member must skip or
// walk. The key is only valid during the call.
func (s *scanner) members(member func(key []byte)) {
	s.object(func(key []byte, escaped bool) bool {
		if escaped {
			var k string
			_ = json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k)
			key = []byte(k)
		}
		member(key)
		return true
	})
}

// elements walks the value at s.i (valid JSON), counted in w: for an array,
// calls element with the scanner at each element, which element must walk,
// and returns their number; any other value counts 0.
func (s *scanner) elements(w *Work, element func()) int {
	if s.b[s.i] != '[' {
		s.count(w)
		return 0
	}
	w.Objects++
	s.i++ // '['
	n := 0
	for {
		s.space()
		switch s.b[s.i] {
		case ']':
			s.i++
			return n
		case ',':
			s.i++
			s.space()
		}
		at := s.i
		element()
		if s.i == at {
			panic("no progress: not valid JSON")
		}
		n++
	}
}

// count skips the value at s.i, counting its objects, arrays and scalars in
// w. It keeps no stack, so no nesting makes it use more memory.
func (s *scanner) count(w *Work) {
	b := s.b
	depth := 0
	for s.i < len(b) {
		switch c := b[s.i]; c {
		case '{', '[':
			w.Objects++
			depth++
			s.i++
			continue
		case '}', ']':
			depth--
			s.i++
		case ',', ':', ' ', '\t', '\n', '\r':
			s.i++
			continue
		case '"':
			s.str()
			j := s.i
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			if j < len(b) && b[j] == ':' {
				continue // a key
			}
			w.Scalars++
		default: // number, true, false, null
			w.Scalars++
			for s.i++; s.i < len(b); s.i++ {
				if c := b[s.i]; c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
					break
				}
			}
		}
		if depth <= 0 {
			return
		}
	}
}

// Refusal says why a review is refused unprocessed, and the code of the
// errored answer, or "": a body that is not a JSON object (400), a pod
// beyond the caps (422, see Excess).
func (w Work) Refusal() (code int32, reason string) {
	if w.notObject {
		return http.StatusBadRequest, "the body is not a JSON object; an AdmissionReview is sent as one"
	}
	if excess := w.Excess(); excess != "" {
		return http.StatusUnprocessableEntity, excess
	}
	return 0, ""
}

// Refuse answers the review of uid, unprocessed, with an errored
// admission.k8s.io/v1 review of code and reason (see Work.Refusal): an
// answer, so the API server refuses the pod whatever the failurePolicy.
func Refuse(w http.ResponseWriter, uid string, code int32, reason string) {
	resp := cradmission.Errored(code, errors.New("sandbox-webhook: "+reason))
	resp.UID = types.UID(uid)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &resp.AdmissionResponse,
	})
}

// object walks the JSON object at s.i (valid JSON), calling member with
// each key (its bytes between the quotes, and whether it holds an escape)
// and the scanner at the key's value, which member must skip or walk. It
// stops, returning false, when member does.
func (s *scanner) object(member func(key []byte, escaped bool) bool) bool {
	s.i++ // '{'
	for {
		s.space()
		if s.i >= len(s.b) {
			return true
		}
		switch s.b[s.i] {
		case '}':
			s.i++
			return true
		case ',':
			s.i++
			s.space()
		}
		start := s.i + 1
		escaped := s.str()
		key := s.b[start : s.i-1]
		s.space()
		s.i++ // ':'
		s.space()
		if !member(key, escaped) {
			return false
		}
	}
}

// scanner skips over parts of valid JSON.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str skips the string at s.i and reports whether it holds an escape.
func (s *scanner) str() (escaped bool) {
	b := s.b
	start := s.i + 1 // after the opening quote
	i := start
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			s.i = len(b)
			return escaped || bytes.IndexByte(b[start:], '\\') >= 0
		}
		q := i + j
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for k := q - 1; k >= start && b[k] == '\\'; k-- {
			n++
		}
		if !escaped && bytes.IndexByte(b[i:q], '\\') >= 0 {
			escaped = true
		}
		if n%2 == 0 {
			s.i = q + 1
			return escaped
		}
		i = q + 1
	}
}

// structural marks the bytes value must look at inside an object or array.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// value skips the value at s.i.
func (s *scanner) value() {
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		b, i, depth := s.b, s.i, 0
		for i < len(b) {
			c := b[i]
			if !structural[c] {
				i++
				continue
			}
			switch c {
			case '"':
				s.i = i
				s.str()
				i = s.i
				continue
			case '{', '[':
				depth++
			default:
				depth--
			}
			i++
			if depth == 0 {
				break
			}
		}
		s.i = i
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}
