package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// ReviewFunc answers one request at Path, whose body the server has read whole
// (within its size limit and deadlines): the one way into the handler.
type ReviewFunc func(w http.ResponseWriter, r *http.Request, body []byte)

// Review returns the admission path. A request goes through it in this
// order, each step answering with an errored AdmissionReview (code 400) when
// the request fails it, since an HTTP error would leave the decision to the
// webhook's failurePolicy:
//
//  1. the Content-Type is application/json and the body is not empty;
//  2. the body is decoded in one pass, the review and its pod together, with
//     the case-sensitive decoder of the API machinery;
//  3. the review is an admission.k8s.io/v1 or v1beta1 AdmissionReview;
//  4. no key of the review or its pod could be read differently by a reader
//     that matches keys without regard to case, as the API machinery's kind
//     detection does (see scanReview);
//  5. handle decides, behind the one panic recovery (handleTimed);
//  6. the answer is encoded as an AdmissionReview of the request's
//     apiVersion and kind, which the API server needs to parse it.
//
// No request logger is built unless a line is logged.
func (h *Handler) Review(log logr.Logger) ReviewFunc {
	log = log.WithName("admission")
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		// The duration metric counts from before the review is decoded.
		start := time.Now()
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			h.rejectBody(w, log, "", fmt.Errorf("content type %.64q, expected application/json", ct))
			return
		}
		// What the pod asks for is counted before it is decoded: decoding
		// is where a pod of many small parts takes its memory.
		work, body := workOf(r.Context(), body)
		if work.Excess() != "" {
			// Beyond the caps (see Work): refused, code 422, before
			// anything of it is decoded.
			log.Info("Refused a pod beyond the webhook's caps", "uid", work.UID, "bytes", work.Bytes, "containers", work.Containers,
				"volumes", work.Volumes, "mounts", work.Mounts, "env", work.Env)
			h.answerError(w, log, types.UID(work.UID), http.StatusUnprocessableEntity, errors.New(work.Excess()))
			return
		}
		tm, req, pod, err := decodeReview(body)
		if err != nil {
			h.rejectBody(w, log, req.UID, err)
			return
		}
		resp := h.handleTimed(r.Context(), start, &lazyLog{base: log, req: &req}, req, pod)
		if err := resp.Complete(req); err != nil {
			log.WithValues(requestValues(&req)...).Error(err, "unable to encode response")
			resp = cradmission.Errored(http.StatusInternalServerError, errors.New("unable to encode response"))
			resp.UID = req.UID
		}
		writeReview(w, tm, &resp.AdmissionResponse, log)
	}
}

// reviewWithPod is an AdmissionReview whose request's object is decoded as
// a Pod in the same pass.
type reviewWithPod struct {
	metav1.TypeMeta `json:",inline"`
	Request         *requestWithPod `json:"request"`
}

type requestWithPod struct {
	admissionv1.AdmissionRequest
	// Object shadows AdmissionRequest.Object.
	Object *corev1.Pod `json:"object"`
}

// decodeReview decodes body as an AdmissionReview. pod is the request's
// object when it decoded as a v1 Pod in the same pass, else nil: handle
// then decodes req.Object itself if it needs a pod, and says why it is not
// one. req carries the review's UID, when it has one, also with an error.
func decodeReview(body []byte) (tm metav1.TypeMeta, req cradmission.Request, pod *corev1.Pod, err error) {
	if len(body) == 0 {
		return tm, req, nil, errors.New("request body is empty")
	}
	withPod := reviewWithPod{}
	if kjson.UnmarshalCaseSensitivePreserveInts(body, &withPod) == nil {
		tm = withPod.TypeMeta
		if r := withPod.Request; r != nil {
			req.AdmissionRequest, pod = r.AdmissionRequest, r.Object
		}
	} else {
		// The object is no Pod: decode it as raw bytes, to answer with
		// the review's UID and, for a pod CREATE, handle's reason.
		review := admissionv1.AdmissionReview{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
			return tm, req, nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
		}
		tm = review.TypeMeta
		if review.Request != nil {
			req.AdmissionRequest = *review.Request
		}
	}
	if tm.Kind != "AdmissionReview" ||
		(tm.APIVersion != admissionv1.SchemeGroupVersion.String() && tm.APIVersion != "admission.k8s.io/v1beta1") {
		return tm, req, nil, fmt.Errorf("expected an AdmissionReview of admission.k8s.io/v1 or v1beta1, got apiVersion %.64q kind %.64q",
			tm.APIVersion, tm.Kind)
	}
	object, ok := scanReview(body)
	if !ok {
		return tm, req, nil, errors.New("the AdmissionReview names a key twice, or spells apiVersion or kind in another case or with an escape")
	}
	if pod == nil {
		return tm, req, nil, nil
	}
	req.Object = runtime.RawExtension{Raw: object}
	// The universal deserializer decodes only a v1 Pod, either part left
	// out, into a Pod: handle decodes anything else again, and says what it is.
	if tm := pod.TypeMeta; (tm.APIVersion != "" && tm.APIVersion != "v1") || (tm.Kind != "" && tm.Kind != "Pod") {
		pod = nil
	}
	return tm, req, pod, nil
}

// rejectBody answers a body that is no AdmissionReview the handler can read
// with an errored review.
func (h *Handler) rejectBody(w http.ResponseWriter, log logr.Logger, uid types.UID, err error) {
	log.Error(err, "Rejected a request that is not an AdmissionReview")
	h.answerError(w, log, uid, http.StatusBadRequest, err)
}

// answerError answers with an errored admission.k8s.io/v1 review a request
// handle never sees, and so counts it here.
func (h *Handler) answerError(w http.ResponseWriter, log logr.Logger, uid types.UID, code int32, err error) {
	h.metrics.ObserveRequest(OutcomeError, 0)
	resp := cradmission.Errored(code, fmt.Errorf("sandbox-webhook: %w", err))
	resp.UID = uid
	writeReview(w, metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}, &resp.AdmissionResponse, log)
}

func writeReview(w http.ResponseWriter, tm metav1.TypeMeta, resp *admissionv1.AdmissionResponse, log logr.Logger) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: tm, Response: resp}); err != nil {
		log.Error(err, "unable to encode and write the response")
	}
}

// requestValues are the key-value pairs of a request-scoped logger.
func requestValues(req *cradmission.Request) []any {
	return []any{"uid", req.UID, "namespace", req.Namespace,
		"operation", req.Operation, "kind", req.Kind.Kind, "dryRun", req.DryRun != nil && *req.DryRun}
}

// lazyLog is the request-scoped logger, built on first use: most admissions
// log nothing at the default level, and adding key-value pairs to a zap
// logger encodes them at once.
type lazyLog struct {
	// base is the logger to add the request's values to.
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
		b := l.base.WithValues(requestValues(l.req)...)
		if l.pod != nil {
			b = b.WithValues("pod", podRef(l.podNS, l.pod), "policySet", l.setHash)
		}
		l.built = &b
	}
	return *l.built
}
