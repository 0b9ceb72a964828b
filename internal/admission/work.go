package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Work is what a review asks the handler to hold while it decodes, mutates
// and patches the pod: its bytes, and the parts that cost memory out of
// proportion to their bytes. A container of a few bytes becomes a typed
// container of about a kilobyte, is copied when mutated, and gets its own
// patch operations: 75,000 of them in a 3 MB review took 600 MB. Every part
// of the review's object and old object is counted, a key named twice
// included.
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
	// UID is the review's request uid, for an answer the API server takes.
	UID string
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
// (decoded, mutated, patched), per part, rounded up.
const (
	costPerContainer = 8 << 10
	costPerVolume    = 3 << 10
	costPerMount     = 1536
	costPerEnv       = 512
)

// Cost is the review's bytes plus an upper estimate of the memory its
// parts take to process beyond their bytes. Decoding and patching a pod of
// few parts takes two to three times its bytes more, which the server's
// bound on the bytes it holds bounds already.
func (w Work) Cost() int64 {
	return w.Bytes + w.PartsCost()
}

// PartsCost is the memory the review's parts take beyond their bytes.
func (w Work) PartsCost() int64 {
	return int64(w.Containers)*costPerContainer + int64(w.Volumes)*costPerVolume +
		int64(w.Mounts)*costPerMount + int64(w.Env)*costPerEnv
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
// miscount, which costs nothing: the decoder checks the whole body is valid
// JSON before it allocates anything for it.
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
		return w
	}
	s.members(func(key []byte) {
		if string(key) != "request" || s.b[s.i] != '{' {
			s.value()
			return
		}
		s.members(func(key []byte) {
			switch {
			case string(key) == "uid" && s.b[s.i] == '"':
				start := s.i
				s.value()
				_ = json.Unmarshal(s.b[start:s.i], &w.UID)
			case (string(key) == "object" || string(key) == "oldObject") && s.b[s.i] == '{':
				s.members(func(key []byte) {
					if string(key) != "spec" || s.b[s.i] != '{' {
						s.value()
						return
					}
					s.countSpec(&w)
				})
			default:
				s.value()
			}
		})
	})
	return w
}

// countSpec counts the pod spec at s.i.
func (s *scanner) countSpec(w *Work) {
	s.members(func(key []byte) {
		switch string(key) {
		case "containers", "initContainers", "ephemeralContainers":
			s.elements(func() {
				w.Containers++
				if s.b[s.i] != '{' {
					s.value()
					return
				}
				s.members(func(key []byte) {
					switch string(key) {
					case "env", "envFrom":
						w.Env += s.elements(s.value)
					case "volumeMounts", "volumeDevices":
						w.Mounts += s.elements(s.value)
					default:
						s.value()
					}
				})
			})
		case "volumes":
			w.Volumes += s.elements(s.value)
		default:
			s.value()
		}
	})
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

// elements walks the value at s.i (valid JSON): for an array, calls element
// with the scanner at each element, which element must skip or walk, and
// returns their number; any other value is skipped and counts 0.
func (s *scanner) elements(element func()) int {
	if s.b[s.i] != '[' {
		s.value()
		return 0
	}
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

type workKey struct{}

// WithWork returns ctx carrying w, the work the server counted in the
// request's body, so that the handler does not count it again.
func WithWork(ctx context.Context, w Work) context.Context {
	return context.WithValue(ctx, workKey{}, w)
}

func workOf(ctx context.Context, body []byte) Work {
	if w, ok := ctx.Value(workKey{}).(Work); ok {
		return w
	}
	return CountWork(body)
}
