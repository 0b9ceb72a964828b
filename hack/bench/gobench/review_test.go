package gobench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admission/v1"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// BenchmarkReview is the cost of one pod CREATE through the webhook's HTTP
// handler (path=handler: decode the review, match, mutate, patch, encode the
// answer) next to the floor (path=floor: the same review through
// controller-runtime's admission webhook with a handler that answers
// "allowed" and nothing else, i.e. only decoding the review and encoding a
// fixed answer). Each pair runs in the same process one after the other, so
// handler/floor is a ratio that survives a noisy machine; hack/bench/benchratio
// computes it from the output.
//
// Pods: a typical sandbox pod (about 5 KB), a large one (hundreds of env vars
// in twelve containers) and one no policy selects. Policies: the seed policy
// alone, or with 9 or 99 policies that do not select the pod.
func BenchmarkReview(b *testing.B) {
	log := productionLogger(io.Discard)
	floor := floorHandler(log)
	for _, n := range []int{1, 10, 100} {
		set, err := benchdata.PolicySet(n)
		if err != nil {
			b.Fatal(err)
		}
		h := handler(set, log)
		for _, c := range benchdata.Cases() {
			body := benchdata.Review(c.Pod)
			checkAnswer(b, h, body, c.Name != "non-matching")
			checkAnswer(b, floor, body, false)
			for _, path := range []struct {
				name string
				h    http.Handler
			}{{"handler", h}, {"floor", floor}} {
				b.Run(fmt.Sprintf("pod=%s/policies=%d/path=%s", c.Name, n, path.name), func(b *testing.B) {
					serveLoop(b, path.h, body)
				})
			}
		}
	}
}

// BenchmarkReviewRatio measures the handler and the floor of
// BenchmarkReview alternately, one review each per iteration, so both see
// the same machine at the same moment: on a shared machine this ratio is
// steadier than one taken from two benchmarks run one after the other. It
// reports handler-ns/op, floor-ns/op and their ratio, handler/floor.
func BenchmarkReviewRatio(b *testing.B) {
	log := productionLogger(io.Discard)
	floor := floorHandler(log)
	for _, n := range []int{1, 10, 100} {
		set, err := benchdata.PolicySet(n)
		if err != nil {
			b.Fatal(err)
		}
		h := handler(set, log)
		for _, c := range benchdata.Cases() {
			body := benchdata.Review(c.Pod)
			checkAnswer(b, h, body, c.Name != "non-matching")
			b.Run(fmt.Sprintf("pod=%s/policies=%d", c.Name, n), func(b *testing.B) {
				var handlerTime, floorTime time.Duration
				rd := bytes.NewReader(nil)
				serve := func(h http.Handler) time.Duration {
					rd.Reset(body)
					r := httptest.NewRequest(http.MethodPost, admission.Path, rd)
					r.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					start := time.Now()
					h.ServeHTTP(w, r)
					d := time.Since(start)
					if w.Code != http.StatusOK {
						b.Fatal(w.Body.String())
					}
					return d
				}
				i := 0
				for b.Loop() {
					// Alternate which goes first, so that neither always
					// finds the other's garbage to collect.
					if i%2 == 0 {
						handlerTime += serve(h)
						floorTime += serve(floor)
					} else {
						floorTime += serve(floor)
						handlerTime += serve(h)
					}
					i++
				}
				b.ReportMetric(float64(handlerTime.Nanoseconds())/float64(b.N), "handler-ns/op")
				b.ReportMetric(float64(floorTime.Nanoseconds())/float64(b.N), "floor-ns/op")
				b.ReportMetric(float64(handlerTime)/float64(floorTime), "handler/floor")
			})
		}
	}
}

// handler is the webhook's admission path as the server serves it, with
// set's policies, the namespace of the benchmark pods and log.
func handler(set *policy.Set, log logr.Logger) http.Handler {
	var config atomic.Pointer[admission.Config]
	config.Store(&admission.Config{Policies: set, Options: mutate.Options{}})
	lookup := func(_ context.Context, name string) (mutate.Namespace, bool) {
		return mutate.Namespace{Name: name}, name == benchdata.Namespace
	}
	return admission.NewHandler(&config, lookup, admission.NewMetrics(prometheus.NewRegistry()), log).Webhook()
}

// floorHandler is the least an admission webhook built on controller-runtime
// does per request: decode the AdmissionReview, answer it allowed.
func floorHandler(log logr.Logger) http.Handler {
	return &cradmission.Webhook{
		Handler: cradmission.HandlerFunc(func(context.Context, cradmission.Request) cradmission.Response {
			return cradmission.Allowed("")
		}),
		LogConstructor: func(base logr.Logger, _ *cradmission.Request) logr.Logger { return log },
	}
}

// productionLogger is the server's logger (JSON, level info) writing to w.
func productionLogger(w io.Writer) logr.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zapcore.InfoLevel)
	return zapr.NewLogger(zap.New(core))
}

// serveLoop posts body to h b.N times the way net/http hands a request to
// a handler: a fresh request and response recorder each time.
func serveLoop(b *testing.B, h http.Handler, body []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	rd := bytes.NewReader(nil)
	for b.Loop() {
		rd.Reset(body)
		r := httptest.NewRequest(http.MethodPost, admission.Path, rd)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Body.String())
		}
	}
}

// checkAnswer makes sure the benchmark measures what it says: an allowed
// answer for the benchmark's uid, with a patch exactly when patched.
func checkAnswer(b *testing.B, h http.Handler, body []byte, patched bool) {
	b.Helper()
	r := httptest.NewRequest(http.MethodPost, admission.Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
		b.Fatalf("not an AdmissionReview answer (%v): %s", err, w.Body.String())
	}
	resp := review.Response
	if !resp.Allowed || resp.UID != benchdata.UID || (len(resp.Patch) > 0) != patched {
		b.Fatalf("answer allowed=%v uid=%s patch=%d bytes, want a patch: %v", resp.Allowed, resp.UID, len(resp.Patch), patched)
	}
}
