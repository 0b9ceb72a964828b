package admission

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// maxReviewBytes is controller-runtime's limit on a review; a larger body
// takes the general path, which answers it.
const maxReviewBytes = 7 * 1024 * 1024

// fastReview is an AdmissionReview whose request's object is decoded as a
// Pod in the same pass.
type fastReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *fastRequest `json:"request"`
}

type fastRequest struct {
	admissionv1.AdmissionRequest
	// Object shadows AdmissionRequest.Object.
	Object *corev1.Pod `json:"object"`
}

// serveFast answers a review the way the general path (controller-runtime's
// webhook behind checkReviewType, then Handle decoding the pod) would, byte
// for byte, doing less: the review and its pod are decoded in one pass with
// the same case-sensitive decoder controller-runtime uses, no request
// logger is built unless a line is logged, and the answer is encoded as
// controller-runtime encodes it. It declines (returns false, having written
// nothing) every review it cannot vouch for, leaving it to the general path:
// another content type, a body that does not decode that way, a review of
// another apiVersion or kind, or keys a case-insensitive reader could take
// for apiVersion or kind (see scanReview).
func (h *Handler) serveFast(w http.ResponseWriter, r *http.Request, log logr.Logger, body []byte) bool {
	if r.Header.Get("Content-Type") != "application/json" || len(body) > maxReviewBytes {
		return false
	}
	// The duration metric covers the pod's decoding, as on the general
	// path, where Handle decodes it; here the review's comes with it.
	start := time.Now()
	review := fastReview{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return false
	}
	if review.Kind != "AdmissionReview" ||
		(review.APIVersion != admissionv1.SchemeGroupVersion.String() && review.APIVersion != "admission.k8s.io/v1beta1") {
		return false
	}
	raw, ok := scanReview(body)
	if !ok {
		return false
	}
	pod := review.Request.podOrNil()
	if pod != nil && !isPodTypeMeta(pod.TypeMeta) {
		return false // the general path says what it is instead
	}
	req := cradmission.Request{}
	if review.Request != nil {
		req.AdmissionRequest = review.Request.AdmissionRequest
		req.Object = runtime.RawExtension{Raw: raw}
	}
	resp := h.handleTimed(r.Context(), start, &lazyLog{base: log, req: &req}, req, pod)
	if err := resp.Complete(req); err != nil {
		// As controller-runtime's webhook does.
		log.WithValues(requestValues(&req)...).Error(err, "unable to encode response")
		resp = cradmission.Errored(http.StatusInternalServerError, errors.New("unable to encode response"))
		resp.UID = req.UID
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: &resp.AdmissionResponse}
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Error(err, "unable to encode and write the response")
	}
	return true
}

// isPodTypeMeta reports whether the universal deserializer decodes an object
// of this apiVersion and kind into a Pod: v1 Pod, either part left out.
func isPodTypeMeta(tm metav1.TypeMeta) bool {
	return (tm.APIVersion == "" || tm.APIVersion == "v1") && (tm.Kind == "" || tm.Kind == "Pod")
}

func (r *fastRequest) podOrNil() *corev1.Pod {
	if r == nil {
		return nil
	}
	return r.Object
}

// lazyLog is the request-scoped logger, built on first use: most admissions
// log nothing at the default level, and adding key-value pairs to a zap
// logger encodes them at once.
type lazyLog struct {
	// base is the logger to add the request's values to, or, with req nil,
	// one that has them already.
	base logr.Logger
	req  *cradmission.Request
	// The pod and the policy set, once known.
	podNS, setHash string
	pod            *corev1.Pod

	built *logr.Logger
}

func (l *lazyLog) v1() bool { return l.base.V(1).Enabled() }

// withPod adds the pod and the policy set to the lines logged from now on.
func (l *lazyLog) withPod(ns string, pod *corev1.Pod, setHash string) {
	l.podNS, l.pod, l.setHash = ns, pod, setHash
	if l.built != nil {
		b := l.built.WithValues("pod", podRef(ns, pod), "policySet", setHash)
		l.built = &b
	}
}

func (l *lazyLog) get() logr.Logger {
	if l.built == nil {
		b := l.base
		if l.req != nil {
			b = b.WithValues(requestValues(l.req)...)
		}
		if l.pod != nil {
			b = b.WithValues("pod", podRef(l.podNS, l.pod), "policySet", l.setHash)
		}
		l.built = &b
	}
	return *l.built
}
