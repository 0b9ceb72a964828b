// Command floor is the baseline hack/bench/loadgen measures the webhook against:
// the least a TLS admission endpoint can do. It uses the webhook's
// certificate and TLS settings (TLS 1.3, HTTP/1.1 only, keep-alive), reads
// each request body whole and answers with a fixed AdmissionReview that
// allows the request, echoing its uid (the first "uid" of the review, the
// request's, found by a byte search). It decodes nothing and imports nothing
// beyond the standard library, so its CPU and memory are the cost of TLS and
// HTTP alone. An API server accepts its answers: the floor of a webhook
// call end to end.
//
// With --patch FILE the fixed answer also carries the JSONPatch in FILE
// (a JSON array of operations, sent as is): the floor of a webhook that
// changes the pod, which adds the API server's work of applying the patch.
// e2e's TestBurstBench gives it the patch sandbox-webhook makes of the
// burst's pod.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/loadgen/internal/floorserver"
)

func main() {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	patchFile := fs.String("patch", "", "answer every review with this JSONPatch (a file holding a JSON array of operations)")
	floorserver.Main("floor", fs, func() (http.Handler, error) {
		tail := answerTail
		if *patchFile != "" {
			patch, err := os.ReadFile(*patchFile)
			if err != nil {
				return nil, err
			}
			if tail, err = patchTail(patch); err != nil {
				return nil, fmt.Errorf("%s: %w", *patchFile, err)
			}
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer(body, tail))
		}), nil
	})
}

const (
	answerHead = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`
	answerTail = `","allowed":true}}` + "\n"
)

// patchTail is the end of an answer that carries patch, which must be a
// JSON array.
func patchTail(patch []byte) (string, error) {
	var ops []json.RawMessage
	if err := json.Unmarshal(patch, &ops); err != nil || ops == nil {
		return "", errors.New("want a JSONPatch: a JSON array of operations")
	}
	return `","allowed":true,"patchType":"JSONPatch","patch":"` + base64.StdEncoding.EncodeToString(patch) + `"}}` + "\n", nil
}

// answer is the fixed answer for the review's uid, ending with tail.
func answer(review []byte, tail string) []byte {
	uid := []byte(nil)
	const key = `"uid":"`
	if i := bytes.Index(review, []byte(key)); i >= 0 {
		rest := review[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			uid = rest[:j]
		}
	}
	out := make([]byte, 0, len(answerHead)+len(uid)+len(tail))
	out = append(out, answerHead...)
	out = append(out, uid...)
	return append(out, tail...)
}
