package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// Webhook is the admission path at Path: it reads the AdmissionReview (v1
// or v1beta1), hands its request to the handler through controller-runtime's
// admission webhook, whose Handle gives the answer the request's uid and
// turns a panic of the handler into an errored answer (code 500), and
// answers in the review's apiVersion. A body it cannot read as an
// AdmissionReview is answered with an errored review (code 400), since an
// HTTP error would leave the decision to the webhook's failurePolicy.
//
// It reads the review as controller-runtime's webhook does, with the
// decoder the API server uses (sigs.k8s.io/json: case-sensitive, integers
// kept), but in one pass, the pod included. controller-runtime's decoder
// reads the body four times (twice to find its kind, twice to decode it,
// the pod kept as bytes), and the pod was then read twice more: half of
// what the handler spent on a typical review (docs/benchmarks.md).
type Webhook struct {
	h  *Handler
	cr *cradmission.Webhook
}

// Webhook returns the admission path of h.
func (h *Handler) Webhook() *Webhook {
	return &Webhook{h: h, cr: &cradmission.Webhook{
		Handler: h,
		// The handler logs its decisions itself.
		LogConstructor: func(logr.Logger, *cradmission.Request) logr.Logger { return h.log },
	}}
}

// maxBodyBytes bounds the body ServeHTTP reads, as controller-runtime's
// webhook does; the server reads the body itself, within
// --max-request-bytes, and calls ServeReview.
const maxBodyBytes = 7 << 20

// ServeHTTP reads the body and answers it with ServeReview; a body that is
// not a JSON object is refused unread (RefuseNotObject).
func (wh *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := ReadBody(w, r, maxBodyBytes)
	if err != nil {
		wh.refuse(w, time.Now(), admissionv1.SchemeGroupVersion.String(), "", http.StatusBadRequest,
			fmt.Errorf("reading the request body: %w", err))
		return
	}
	price := PriceReview(body)
	if price.NotObject {
		wh.h.metrics.ObserveRequest(OutcomeError, 0)
		RefuseNotObject(w)
		return
	}
	wh.ServeReview(w, r, body, price)
}

// ReadBody reads the request body whole, at most limit bytes: into a buffer
// of the announced size when there is one (net/http ends the body there),
// else growing, as io.ReadAll does.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= limit {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// ServeReview answers the AdmissionReview in body, which PriceReview
// counted as price.
func (wh *Webhook) ServeReview(w http.ResponseWriter, r *http.Request, body []byte, price Price) {
	start := time.Now()
	version := admissionv1.SchemeGroupVersion.String()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		wh.refuse(w, start, version, "", http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct))
		return
	}
	req, pod, version, err := decodeReview(body, price.object)
	if err != nil {
		wh.refuse(w, start, version, req.UID, http.StatusBadRequest, err)
		return
	}
	ctx := context.WithValue(r.Context(), startKey{}, start)
	if pod != nil {
		ctx = context.WithValue(ctx, podKey{}, pod)
	}
	resp := wh.cr.Handle(ctx, req)
	if err := writeReview(w, version, resp); err != nil {
		wh.h.log.Error(err, "Writing the answer failed")
	}
}

// refuse answers with an errored review of code and counts it.
func (wh *Webhook) refuse(w http.ResponseWriter, start time.Time, version string, uid types.UID, code int32, err error) {
	resp, outcome := errored(wh.h.log, code, err)
	resp.UID = uid
	wh.h.metrics.ObserveRequest(outcome, time.Since(start))
	_ = writeReview(w, version, resp)
}

// podKey is the context key of the request's object as ServeReview
// decoded it with the review (a decodedPod), which the handler then does
// not decode again.
type podKey struct{}

// decodedPod is the request's object decoded as a v1 Pod, or why it is not
// one.
type decodedPod struct {
	pod *corev1.Pod
	err error
}

// podReview is an AdmissionReview whose request's object is decoded as a
// Pod as the rest of the review is: the Object of podRequest takes the
// place of the AdmissionRequest's (encoding/json's rule for a field of an
// embedded struct and one of the same name).
type podReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *podRequest `json:"request,omitempty"`
}

type podRequest struct {
	admissionv1.AdmissionRequest `json:",inline"`
	Object                       *corev1.Pod `json:"object,omitempty"`
}

var (
	reviewV1      = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	reviewV1beta1 = admissionv1beta1.SchemeGroupVersion.WithKind("AdmissionReview")
)

// decodeReview reads body as an AdmissionReview and returns its request,
// its object as a pod when the review was read with it (decoded: else the
// handler decodes the object), and the review's apiVersion. object is
// where PriceReview found the request's object in body: the request's
// object is those bytes, not a copy, read in the same pass as the rest of
// the review. When that pass fails, the review is read again with its
// object kept as bytes, as controller-runtime's webhook reads it: if that
// succeeds, the first pass failed on the object, and its error is what
// decoding the object gives (the handler reports it only for a pod's
// CREATE, as before).
func decodeReview(body []byte, object span) (req cradmission.Request, pod *decodedPod, version string, err error) {
	raw := object.in(body)
	var inPlace error
	if raw != nil {
		var review podReview
		inPlace = sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review)
		if inPlace == nil && review.Request != nil && review.Request.Object != nil {
			version, err = reviewVersion(review.TypeMeta)
			req.AdmissionRequest = review.Request.AdmissionRequest
			req.Object.Raw = raw
			return req, &decodedPod{review.Request.Object, checkPodKind(review.Request.Object)}, version, err
		}
	}
	var review admissionv1.AdmissionReview
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return req, nil, reviewV1.GroupVersion().String(), fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if review.Request != nil {
		req.AdmissionRequest = *review.Request
	}
	if inPlace != nil {
		pod = &decodedPod{err: inPlace}
	}
	version, err = reviewVersion(review.TypeMeta)
	return req, pod, version, err
}

// reviewVersion is the apiVersion to answer a review of type meta in: its
// own, completed as the decoder completes it (reviewV1 for what it leaves
// out), and an error when that is not an AdmissionReview of
// admission.k8s.io/v1 or v1beta1.
func reviewVersion(meta metav1.TypeMeta) (string, error) {
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		return reviewV1.GroupVersion().String(), fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	switch gvk := gvkWithDefaults(gv.WithKind(meta.Kind), reviewV1); gvk {
	case reviewV1, reviewV1beta1:
		return gvk.GroupVersion().String(), nil
	default:
		return reviewV1.GroupVersion().String(), fmt.Errorf("the body is a %s, not an AdmissionReview of %s or %s", gvk, reviewV1.GroupVersion(), reviewV1beta1.GroupVersion())
	}
}

// writeReview answers with resp in a review of apiVersion version.
func writeReview(w http.ResponseWriter, version string, resp cradmission.Response) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: version, Kind: reviewV1.Kind},
		Response: &resp.AdmissionResponse,
	})
}
