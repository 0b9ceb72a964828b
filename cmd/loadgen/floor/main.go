// Command floor is the baseline cmd/loadgen measures the webhook against:
// the least a TLS admission endpoint can do. It uses the webhook's
// certificate and TLS settings (TLS 1.3, HTTP/1.1 only, keep-alive), reads
// each request body whole and answers with a fixed AdmissionReview that
// allows the request, echoing its uid (the first "uid" of the review, the
// request's, found by a byte search). It decodes nothing and imports nothing
// beyond the standard library, so its CPU and memory are the cost of TLS and
// HTTP alone. An API server accepts its answers: the floor of a webhook
// call end to end.
package main

import (
	"bytes"
	"io"
	"net/http"

	"github.com/sandbox-webhook/sandbox-webhook/cmd/loadgen/internal/floorserver"
)

func main() {
	floorserver.Main("floor", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer(body))
	}))
}

const (
	answerHead = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`
	answerTail = `","allowed":true}}` + "\n"
)

// answer is the fixed answer for the review's uid.
func answer(review []byte) []byte {
	uid := []byte(nil)
	const key = `"uid":"`
	if i := bytes.Index(review, []byte(key)); i >= 0 {
		rest := review[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			uid = rest[:j]
		}
	}
	out := make([]byte, 0, len(answerHead)+len(uid)+len(answerTail))
	out = append(out, answerHead...)
	out = append(out, uid...)
	return append(out, answerTail...)
}
