package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Path is the URL path the webhook is served at.
const Path = "/mutate-v1-pod"

// Config is everything a decision reads besides the request and the
// namespace. A Config is never modified once published: a reload builds a new
// one and swaps the pointer, so a request sees either the old or the new
// policies and options, never half of each.
type Config struct {
	Policies *policy.Set
	Options  mutate.Options
}

// NamespaceLookup returns what the namespace cache knows about the named
// namespace, and false when the namespace is not in the cache. It must not
// call the API server: it runs on the admission path.
type NamespaceLookup func(ctx context.Context, name string) (mutate.Namespace, bool)

// Handler is the pod admission handler. It is safe for concurrent use.
type Handler struct {
	config     *atomic.Pointer[Config]
	namespaces NamespaceLookup
	metrics    *Metrics
	decoder    cradmission.Decoder
}

// NewHandler returns a handler that reads the current Config from config on
// every request and namespace facts from namespaces.
func NewHandler(config *atomic.Pointer[Config], namespaces NamespaceLookup, metrics *Metrics) *Handler {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		// Registering a compiled-in API group cannot fail.
		panic(err)
	}
	return &Handler{
		config:     config,
		namespaces: namespaces,
		metrics:    metrics,
		decoder:    cradmission.NewDecoder(scheme),
	}
}

// handleTimed answers one admission request (see handle) and counts it,
// from start, the time its decoding started. pod is the request's object
// when it is decoded already. It is the handler's one panic recovery: a
// panic is answered with an errored review and counted as an error.
func (h *Handler) handleTimed(ctx context.Context, start time.Time, log *lazyLog, req cradmission.Request, pod *corev1.Pod) (resp cradmission.Response) {
	outcome := OutcomeError // unless handle returns
	defer func() {
		if r := recover(); r != nil {
			log.get().Error(fmt.Errorf("panic: %v", r), "Admission handler panicked; answering with an error", "stack", string(debug.Stack()))
			resp = cradmission.Errored(http.StatusInternalServerError,
				fmt.Errorf("sandbox-webhook: internal error, the pod was not mutated (panic: %v)", r))
		}
		h.metrics.ObserveRequest(outcome, time.Since(start))
	}()
	resp, outcome = h.handle(ctx, log, req, pod)
	return resp
}

// handle decides one admission request. Only the CREATE of a Pod is
// mutated; an update of pods/ephemeralcontainers may be denied (see
// handleEphemeral); every other request is allowed unchanged with the
// reason. Dry-run requests are handled like any other: the handler has no
// side effects.
func (h *Handler) handle(ctx context.Context, log *lazyLog, req cradmission.Request, pod *corev1.Pod) (cradmission.Response, Outcome) {
	if req.UID == "" {
		return errored(log, http.StatusBadRequest, errors.New("the AdmissionReview has no request or its request has no uid"))
	}
	if isEphemeralContainersUpdate(req) {
		return h.handleEphemeral(log, req, pod)
	}
	if reason := skipRequest(req); reason != "" {
		if log.v1() {
			log.get().V(1).Info("Admission decision", "outcome", OutcomeSkipped, "reason", reason)
		}
		return cradmission.Allowed(reason), OutcomeSkipped
	}
	pod, err := h.requestPod(req, pod)
	if err != nil {
		return errored(log, http.StatusBadRequest, err)
	}

	cfg := h.config.Load()
	if cfg == nil {
		return errored(log, http.StatusServiceUnavailable, errors.New("no policies are loaded yet"))
	}
	nsName := cmp.Or(req.Namespace, pod.Namespace)
	if nsName == "" {
		return errored(log, http.StatusBadRequest, errors.New("the request names no namespace"))
	}
	ns, ok := h.namespaces(ctx, nsName)
	if !ok {
		return errored(log, http.StatusServiceUnavailable,
			fmt.Errorf("namespace %q is not in the webhook's namespace cache yet; retry", nsName))
	}
	ns.Name = nsName

	res := mutate.Pod(pod, ns, cfg.Policies, cfg.Options)
	h.metrics.observeResult(res)

	log.withPod(nsName, pod, cfg.Policies.Hash)
	if shadow := shadowItems(res); len(shadow) > 0 {
		// Shadow policies never patch: what they would do is logged and counted.
		log.get().Info("Shadow policies would change the pod", "shadow", shadow)
	}
	warnings := res.Warnings
	decision := func(outcome Outcome, kv ...any) {
		if !log.v1() {
			return
		}
		log.get().V(1).Info("Admission decision", append([]any{
			"outcome", outcome,
			"matched", matchedPolicies(res),
			"applied", items(res.Applied, false),
			"skipped", items(res.Skipped, true),
			"warnings", len(warnings),
		}, kv...)...)
	}

	if res.PodSkipped != "" {
		decision(OutcomeSkipped, "reason", res.PodSkipped)
		return cradmission.Allowed(res.PodSkipped).WithWarnings(warnings...), OutcomeSkipped
	}
	if res.Denied != "" {
		// The reason names containers, volumes and paths: it goes to the
		// client, never to the log.
		decision(OutcomeDenied)
		return cradmission.Denied(res.Denied).WithWarnings(warnings...), OutcomeDenied
	}
	var ops []jsonpatch.Operation
	if res.Changed {
		// The core never writes the namespace (TestPatchNeverWritesTheNamespace):
		// it stays whatever the client sent, often nothing.
		if ops, err = mutate.Patch(req.Object.Raw, pod, res.Pod); err != nil {
			return errored(log, http.StatusInternalServerError, fmt.Errorf("computing the patch: %w", err))
		}
	}
	if len(ops) == 0 {
		reason := unchangedReason(res)
		decision(OutcomeUnchanged, "reason", reason)
		return cradmission.Allowed(reason).WithWarnings(warnings...), OutcomeUnchanged
	}
	decision(OutcomeMutated, "operations", len(ops))
	resp, err := patched("mutated by "+strings.Join(matchedPolicies(res), ", "), ops)
	if errors.Is(err, errPatchTooLarge) {
		return errored(log, http.StatusUnprocessableEntity, err)
	}
	if err != nil {
		return errored(log, http.StatusInternalServerError, err)
	}
	return resp.WithWarnings(warnings...), OutcomeMutated
}

// isEphemeralContainersUpdate reports whether req adds ephemeral containers
// to a pod (kubectl debug): the one request besides a pod's CREATE that is
// judged, because it can mount the pod's volumes anew.
func isEphemeralContainersUpdate(req cradmission.Request) bool {
	return req.Kind.Group == "" && req.Kind.Kind == "Pod" &&
		req.SubResource == "ephemeralcontainers" && req.Operation == admissionv1.Update
}

// requestPod returns the request's pod: pod when the caller has decoded it
// already, else the decoded object.
func (h *Handler) requestPod(req cradmission.Request, pod *corev1.Pod) (*corev1.Pod, error) {
	if len(req.Object.Raw) == 0 {
		return nil, errors.New("the request carries no object")
	}
	if pod != nil {
		return pod, nil
	}
	pod = &corev1.Pod{}
	if err := h.decoder.DecodeRaw(req.Object, pod); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	return pod, nil
}

// handleEphemeral answers an update of pods/ephemeralcontainers: denied when
// an ephemeral container it adds mounts a hostPath volume of the pod other
// than read-only, whole and without propagation (see
// ephemeralHostPathProblems), otherwise allowed unchanged. It never patches.
func (h *Handler) handleEphemeral(log *lazyLog, req cradmission.Request, pod *corev1.Pod) (cradmission.Response, Outcome) {
	pod, err := h.requestPod(req, pod)
	if err != nil {
		return errored(log, http.StatusBadRequest, err)
	}
	var old *corev1.Pod
	if len(req.OldObject.Raw) > 0 {
		old = &corev1.Pod{}
		if err := h.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return errored(log, http.StatusBadRequest, fmt.Errorf("decoding the old pod: %w", err))
		}
	}
	if problems := ephemeralHostPathProblems(pod, old); len(problems) > 0 {
		// The reason names containers and volumes: it goes to the client,
		// never to the log.
		if log.v1() {
			log.get().V(1).Info("Admission decision", "outcome", OutcomeDenied, "problems", len(problems))
		}
		return cradmission.Denied(fmt.Sprintf("sandbox-webhook: %s; an ephemeral container may mount a hostPath volume only readOnly: true, whole (no subPath or subPathExpr) and without mountPropagation",
			strings.Join(problems, "; "))), OutcomeDenied
	}
	const reason = "sandbox-webhook does not mutate the pods/ephemeralcontainers subresource; no ephemeral container mounts a hostPath volume other than read-only and whole"
	if log.v1() {
		log.get().V(1).Info("Admission decision", "outcome", OutcomeSkipped, "reason", reason)
	}
	return cradmission.Allowed(reason), OutcomeSkipped
}

// skipRequest says why a request is not one this webhook mutates, or "".
func skipRequest(req cradmission.Request) string {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return fmt.Sprintf("sandbox-webhook mutates only Pods, not %s", kindString(req))
	}
	if req.SubResource != "" {
		return fmt.Sprintf("sandbox-webhook does not mutate the pods/%s subresource", req.SubResource)
	}
	if req.Operation != admissionv1.Create {
		return fmt.Sprintf("sandbox-webhook mutates pods only at CREATE, not %s", req.Operation)
	}
	return ""
}

func kindString(req cradmission.Request) string {
	if req.Kind.Kind == "" {
		return "an object of unnamed kind"
	}
	if req.Kind.Group == "" {
		return req.Kind.Version + " " + req.Kind.Kind
	}
	return req.Kind.Group + "/" + req.Kind.Version + " " + req.Kind.Kind
}

func errored(log *lazyLog, code int32, err error) (cradmission.Response, Outcome) {
	log.get().Error(err, "Admission request failed", "code", code)
	return cradmission.Errored(code, fmt.Errorf("sandbox-webhook: %w", err)), OutcomeError
}

// podRef names the pod for logs: namespace/name, or namespace/generateName*
// for pods that are named by the API server after admission.
func podRef(ns string, pod *corev1.Pod) string {
	if pod.Name != "" {
		return ns + "/" + pod.Name
	}
	return ns + "/" + pod.GenerateName + "*"
}

func matchedPolicies(res mutate.Result) []string {
	var out []string
	for _, p := range res.Policies {
		if p.Matched && p.Enforcement != policy.Shadow {
			out = append(out, p.Policy)
		}
	}
	return out
}

// items lists decisions as policy/item (with the reason for skipped ones),
// leaving out shadow decisions, which are logged on their own.
func items(ds []mutate.Decision, withReason bool) []string {
	var out []string
	for _, d := range ds {
		if d.Shadow {
			continue
		}
		s := d.Policy + "/" + d.Item
		if withReason && d.Reason != "" {
			s += ": " + d.Reason
		}
		out = append(out, s)
	}
	return out
}

func shadowItems(res mutate.Result) []string {
	var out []string
	for _, d := range res.Applied {
		if d.Shadow {
			out = append(out, d.Policy+"/"+d.Item)
		}
	}
	for _, d := range res.Skipped {
		if d.Shadow {
			out = append(out, d.Policy+"/"+d.Item+" (skipped: "+d.Reason+")")
		}
	}
	return out
}

func unchangedReason(res mutate.Result) string {
	if len(matchedPolicies(res)) == 0 {
		return "no enforced policy matches the pod"
	}
	return "the pod already has everything the matching policies inject"
}
