package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
)

// gate is the webhook's HTTP handler at admission.Path: it does what the
// HTTP server does not do per request, then reads the body and hands it to
// next, the admission webhook. In order: the write deadline,
// "Connection: close" once shutdown began, so that the API server moves its
// keep-alive connections elsewhere, a 503 while the first configuration or
// the namespace cache is missing, the request body limit
// (--max-request-bytes, 413), room for the body in the request budget before
// it is read (503 when there is none within budgetWait) and a read deadline
// sized to the body; then, before anything of it is decoded, its values are
// counted (admission.PriceReview): a body that is not a JSON object is
// refused with an errored review (400), and room for processing the others
// is taken from the budget (an errored review of code 413 when the whole
// budget would not do: a property of the pod is answered, never left to the
// failurePolicy). The body and its count, which notes where the pod is in
// it, go to next.ServeReview.
//
// The 503s and the 413 of a body above the limit are HTTP errors, not
// AdmissionReview answers: the API server treats them as a failed call, and
// the webhook's failurePolicy decides, as it would if this server were
// unreachable. A body above the limit is not read, so it has no uid to
// answer; the API server's own request limit (3 MiB by default) is below
// --max-request-bytes' default for a CREATE.
func (s *server) gate(next *admission.Webhook) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rc := http.NewResponseController(w)
		if d := s.opts.WriteTimeout; d > 0 {
			_ = rc.SetWriteDeadline(start.Add(d))
		}
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		if err := s.servingReady(); err != nil {
			s.admission.ObserveRequest(admission.OutcomeError, time.Since(start))
			http.Error(w, "sandbox-webhook is not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		limit := s.opts.MaxRequestBytes
		if r.ContentLength > limit {
			s.tooLarge(w, start, fmt.Sprintf("%d bytes", r.ContentLength))
			return
		}
		// Room for the body before a byte of it is read: its announced
		// length, or the limit when it has none (chunked).
		n := r.ContentLength
		if n < 0 {
			n = limit
		}
		wait, cancel := context.WithTimeout(r.Context(), budgetWait)
		release, err := s.budget.acquire(wait, n)
		cancel()
		if err != nil {
			s.busy(w, start, fmt.Sprintf("a request body of %d bytes", n))
			return
		}
		defer release()
		_ = rc.SetReadDeadline(time.Now().Add(bodyReadTime(n, s.opts.ReadTimeout)))
		body, err := admission.ReadBody(w, r, limit)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				s.tooLarge(w, start, "more than that")
				return
			}
			s.admission.ObserveRequest(admission.OutcomeError, time.Since(start))
			http.Error(w, "sandbox-webhook: reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		// What decoding, mutating and patching the pod will hold, beyond
		// the body, before any of it is decoded.
		price := admission.PriceReview(body)
		if price.NotObject {
			s.admission.ObserveRequest(admission.OutcomeError, time.Since(start))
			s.log.Info("Refused an admission request unprocessed: the body is not a JSON object", "bytes", len(body))
			admission.RefuseNotObject(w)
			return
		}
		extra := price.Memory()
		if !s.budget.fitsMore(n, extra) {
			s.tooCostly(w, start, price, body)
			return
		}
		wait, cancel = context.WithTimeout(r.Context(), budgetWait)
		releaseMore, err := s.budget.acquireMore(wait, n, extra)
		cancel()
		if err != nil {
			s.busy(w, start, fmt.Sprintf("processing a review of %s (about %d bytes beside its body)", price, extra))
			return
		}
		defer releaseMore()
		next.ServeReview(w, r, body, price)
	})
}

// tooCostly answers a request whose processing would take more than the
// whole budget: no wait would make room for it. That is a property of the
// pod, so the answer is a refusal in the review (code 413), which the API
// server applies whatever the failurePolicy; only a body with no request
// uid to answer gets an HTTP 413.
func (s *server) tooCostly(w http.ResponseWriter, start time.Time, price admission.Price, body []byte) {
	s.admission.ObserveRequest(admission.OutcomeError, time.Since(start))
	s.log.Info("Refused an admission request that would take more memory than the request budget", "work", price.String(),
		"cost", price.Bytes+price.Memory(), "maxBufferedBytes", s.opts.MaxBufferedBytes)
	reason := fmt.Sprintf("processing this AdmissionReview (%s) would take about %d MiB, more than --max-buffered-bytes %d admits; "+
		"the pod is beyond what the webhook processes (see docs/serve.md)", price, (price.Bytes+price.Memory())>>20, s.opts.MaxBufferedBytes)
	if admission.RefuseReview(w, body, http.StatusRequestEntityTooLarge, reason) {
		return
	}
	http.Error(w, "sandbox-webhook: "+reason, http.StatusRequestEntityTooLarge)
}

// busy answers a request that found no room in the budget. The API server
// treats the 503 as a failed call (failurePolicy decides); the connection is
// closed, as its unread body would be in the way.
func (s *server) busy(w http.ResponseWriter, start time.Time, what string) {
	s.admission.ObserveRequest(admission.OutcomeError, time.Since(start))
	s.metrics.budgetRefusals.Inc()
	// At debug level only: under a flood this line would be one per request.
	s.log.V(1).Info("Refused a request: the server holds as many request bodies as it may", "for", what,
		"maxBufferedBytes", s.opts.MaxBufferedBytes, "maxInFlight", s.opts.MaxInFlight)
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("sandbox-webhook is busy: no room for %s within %s (--max-buffered-bytes %d, --max-in-flight %d)",
		what, budgetWait, s.opts.MaxBufferedBytes, s.opts.MaxInFlight), http.StatusServiceUnavailable)
}

func (s *server) tooLarge(w http.ResponseWriter, start time.Time, size string) {
	s.admission.ObserveRequest(admission.OutcomeError, time.Since(start))
	s.log.Info("Rejected an oversized admission request", "size", size, "limit", s.opts.MaxRequestBytes)
	http.Error(w, fmt.Sprintf("sandbox-webhook: the AdmissionReview is %s; the limit is %d bytes (--max-request-bytes)",
		size, s.opts.MaxRequestBytes), http.StatusRequestEntityTooLarge)
}

// servingReady says why admissions cannot be answered yet, or nil.
func (s *server) servingReady() error {
	if s.config.Load() == nil {
		return s.reloader.ready()
	}
	return s.namespaces.synced()
}
