package admission

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// BenchmarkAdmit is one sandbox pod CREATE through the webhook's HTTP
// handler: decode the review, mutate, patch, encode the answer.
func BenchmarkAdmit(b *testing.B) {
	f := newFixture(b, memoryPolicies(b), mutate.Options{})
	h := serveBody(f.handler.Review(logr.Discard()))
	body := reviewBody(b, newRequest(admissionv1.Create, "sandboxes", podJSON(b, "basic")))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Body.String())
		}
	}
}
