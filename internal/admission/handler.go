package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

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

// Handler is the pod admission handler, a controller-runtime
// admission.Handler. It is safe for concurrent use.
type Handler struct {
	config     *atomic.Pointer[Config]
	namespaces NamespaceLookup
	metrics    *Metrics
	log        logr.Logger
}

// NewHandler returns a handler that reads the current Config from config on
// every request and namespace facts from namespaces, and logs to log.
func NewHandler(config *atomic.Pointer[Config], namespaces NamespaceLookup, metrics *Metrics, log logr.Logger) *Handler {
	return &Handler{
		config:     config,
		namespaces: namespaces,
		metrics:    metrics,
		log:        log.WithName("admission"),
	}
}

// startKey is the context key of the time ServeReview began: the duration
// metric counts from before the review is decoded.
type startKey struct{}

// Handle answers one admission request (see handle) and counts it.
func (h *Handler) Handle(ctx context.Context, req cradmission.Request) cradmission.Response {
	start, ok := ctx.Value(startKey{}).(time.Time)
	if !ok {
		start = time.Now()
	}
	// Counted as an error unless handle returns: the webhook answers a
	// panic with code 500.
	outcome := OutcomeError
	defer func() { h.metrics.ObserveRequest(outcome, time.Since(start)) }()
	resp, outcome := h.handle(ctx, withDeferredValues(h.log, requestValues(&req)...), req)
	return resp
}

// handle decides one admission request. Only the CREATE of a Pod is
// mutated; an update of pods/ephemeralcontainers may be denied (see
// handleEphemeral); every other request is allowed unchanged with the
// reason. Dry-run requests are handled like any other: the handler has no
// side effects.
func (h *Handler) handle(ctx context.Context, log logr.Logger, req cradmission.Request) (cradmission.Response, Outcome) {
	if req.UID == "" {
		return errored(log, http.StatusBadRequest, errors.New("the AdmissionReview has no request or its request has no uid"))
	}
	if isEphemeralContainersUpdate(req) {
		return h.handleEphemeral(ctx, log, req)
	}
	if reason := skipRequest(req); reason != "" {
		log.V(1).Info("Admission decision", "outcome", OutcomeSkipped, "reason", reason)
		return cradmission.Allowed(reason), OutcomeSkipped
	}
	pod, err := h.requestObject(ctx, req)
	if err != nil {
		return errored(log, http.StatusBadRequest, err)
	}
	if excess := beyondCaps(pod); excess != "" {
		return errored(log, http.StatusUnprocessableEntity, errors.New(excess))
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

	log = log.WithValues("pod", podRef(nsName, pod), "policySet", cfg.Policies.Hash)
	if shadow := shadowItems(res); len(shadow) > 0 {
		// Shadow policies never patch: what they would do is logged and counted.
		log.Info("Shadow policies would change the pod", "shadow", shadow)
	}
	warnings := res.Warnings
	decision := func(outcome Outcome, kv ...any) {
		if !log.V(1).Enabled() {
			return
		}
		log.V(1).Info("Admission decision", append([]any{
			"outcome", outcome,
			"matched", matchedPolicies(res),
			"applied", items(res.Applied, false),
			"skipped", items(res.Skipped, true),
			"warnings", len(warnings),
		}, kv...)...)
	}

	if res.PodSkipped != "" && !res.OnlyStatus {
		decision(OutcomeSkipped, "reason", res.PodSkipped)
		return cradmission.Allowed(res.PodSkipped).WithWarnings(warnings...), OutcomeSkipped
	}
	if res.Denied != "" {
		// The reason names containers, volumes and paths: it goes to the
		// client, never to the log.
		decision(OutcomeDenied)
		return cradmission.Denied(res.Denied).WithWarnings(warnings...), OutcomeDenied
	}
	var patch []byte
	if res.Changed {
		// The core never writes the namespace (TestPatchNeverWritesTheNamespace):
		// it stays whatever the client sent, often nothing.
		if patch, err = h.patch(req.Object.Raw, pod, res.Pod); errors.Is(err, errPatchTooLarge) {
			return errored(log, http.StatusUnprocessableEntity, err)
		} else if err != nil {
			return errored(log, http.StatusInternalServerError, fmt.Errorf("computing the patch: %w", err))
		}
	}
	if patch == nil {
		reason := unchangedReason(res)
		decision(OutcomeUnchanged, "reason", reason)
		return cradmission.Allowed(reason).WithWarnings(warnings...), OutcomeUnchanged
	}
	pt := admissionv1.PatchTypeJSONPatch
	if res.OnlyStatus {
		// No policy changed it; the patch is --status-always's empty
		// status annotation only.
		outcome, reason := OutcomeUnchanged, unchangedReason(res)
		if res.PodSkipped != "" {
			outcome, reason = OutcomeSkipped, res.PodSkipped
		}
		decision(outcome, "reason", reason)
		resp := cradmission.Allowed(reason)
		resp.Patch, resp.PatchType = patch, &pt
		return resp.WithWarnings(warnings...), outcome
	}
	decision(OutcomeMutated, "patchBytes", len(patch))
	resp := cradmission.Allowed("mutated by " + strings.Join(matchedPolicies(res), ", "))
	resp.Patch, resp.PatchType = patch, &pt
	return resp.WithWarnings(warnings...), OutcomeMutated
}

// MaxPatchBytes bounds the patch of one admission. A sandbox pod's is 1 to
// 3 KiB; the pod caps (MaxContainers and the rest) keep any pod's well
// below it, so only a policy set injecting into a pod near every cap could
// reach it, and the pod is then refused rather than answered with a patch
// the API server would hold in full for every webhook call.
const MaxPatchBytes = 2 << 20

var errPatchTooLarge = errors.New("no pod needs so large a patch")

// patch returns the encoded JSONPatch from raw, the pod as the API server
// sent it, to mutated, what the core made of original (raw decoded), or nil
// when there is nothing to change: mutate.Patch, as dry-run makes it.
func (h *Handler) patch(raw []byte, original, mutated *corev1.Pod) ([]byte, error) {
	ops, err := mutate.Patch(raw, original, mutated)
	if err != nil || len(ops) == 0 {
		return nil, err
	}
	b, err := mutate.MarshalPatch(ops)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPatchBytes {
		return nil, fmt.Errorf("the patch is %d bytes, more than %d: %w", len(b), MaxPatchBytes, errPatchTooLarge)
	}
	return b, nil
}

// isEphemeralContainersUpdate reports whether req adds ephemeral containers
// to a pod (kubectl debug): the one request besides a pod's CREATE that is
// judged, because it can mount the pod's volumes anew.
func isEphemeralContainersUpdate(req cradmission.Request) bool {
	return req.Kind.Group == "" && req.Kind.Kind == "Pod" &&
		req.SubResource == "ephemeralcontainers" && req.Operation == admissionv1.Update
}

// podKind is what decodePod accepts an object as.
var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

// decodePod decodes the request's object as a v1 Pod (without apiVersion
// and kind it is taken for one), as the universal deserializer decodes into
// a typed Pod (sigs.k8s.io/json, case-sensitive, integers kept), in one
// pass: the deserializer reads the object once for its apiVersion and kind
// and once more for the pod, and the pod holds them both. An object of
// another version or kind is refused, as the deserializer refuses it; keys
// that spell apiVersion or kind in another case are unknown fields here,
// as they are to the API server, which never sends them.
func (h *Handler) decodePod(object runtime.RawExtension) (*corev1.Pod, error) {
	if len(object.Raw) == 0 {
		return nil, errors.New("the request carries no object")
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(object.Raw, pod); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	if err := checkPodKind(pod); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	return pod, nil
}

// requestObject is the request's object as a pod: as ServeReview decoded
// it with the review, else decodePod's.
func (h *Handler) requestObject(ctx context.Context, req cradmission.Request) (*corev1.Pod, error) {
	if d, ok := ctx.Value(podKey{}).(*decodedPod); ok {
		if d.err != nil {
			return nil, fmt.Errorf("decoding the pod: %w", d.err)
		}
		return d.pod, nil
	}
	return h.decodePod(req.Object)
}

// checkPodKind refuses a pod decoded from an object of another apiVersion
// or kind.
func checkPodKind(pod *corev1.Pod) error {
	gv, err := schema.ParseGroupVersion(pod.APIVersion)
	if err != nil {
		return err
	}
	if gvk := gvkWithDefaults(gv.WithKind(pod.Kind), podKind); gvk != podKind {
		return fmt.Errorf("the object is a %s, not a %s", gvk, podKind)
	}
	return nil
}

// gvkWithDefaults is actual with what it leaves out taken from defaults,
// as k8s.io/apimachinery's JSON serializer completes an object's kind from
// the type it decodes into.
func gvkWithDefaults(actual, defaults schema.GroupVersionKind) schema.GroupVersionKind {
	if actual.Kind == "" {
		actual.Kind = defaults.Kind
	}
	if actual.Version == "" && actual.Group == "" {
		actual.Group, actual.Version = defaults.Group, defaults.Version
	}
	if actual.Version == "" && actual.Group == defaults.Group {
		actual.Version = defaults.Version
	}
	return actual
}

// handleEphemeral answers an update of pods/ephemeralcontainers: denied when
// an ephemeral container it adds mounts a hostPath volume of the pod other
// than read-only, whole and without propagation (see
// ephemeralHostPathProblems), otherwise allowed, with the images of the
// containers it adds mirrored by the policies that select the pod
// (mutate.EphemeralMirrors).
func (h *Handler) handleEphemeral(ctx context.Context, log logr.Logger, req cradmission.Request) (cradmission.Response, Outcome) {
	pod, err := h.requestObject(ctx, req)
	if err != nil {
		return errored(log, http.StatusBadRequest, err)
	}
	var old *corev1.Pod
	if len(req.OldObject.Raw) > 0 {
		if old, err = h.decodePod(req.OldObject); err != nil {
			return errored(log, http.StatusBadRequest, fmt.Errorf("the old object: %w", err))
		}
	}
	if excess := beyondCaps(pod, old); excess != "" {
		return errored(log, http.StatusUnprocessableEntity, errors.New(excess))
	}
	if problems := ephemeralHostPathProblems(pod, old); len(problems) > 0 {
		// The reason names containers and volumes: it goes to the client,
		// never to the log.
		log.V(1).Info("Admission decision", "outcome", OutcomeDenied, "problems", len(problems))
		return cradmission.Denied(fmt.Sprintf("sandbox-webhook: %s; an ephemeral container may mount a hostPath volume only readOnly: true, whole (no subPath or subPathExpr) and without mountPropagation",
			strings.Join(problems, "; "))), OutcomeDenied
	}
	if resp, outcome, ok := h.mirrorEphemeral(ctx, log, req, pod, old); ok {
		return resp, outcome
	}
	const reason = "no ephemeral container mounts a hostPath volume other than read-only and whole, and no image of one is mirrored"
	log.V(1).Info("Admission decision", "outcome", OutcomeSkipped, "reason", reason)
	return cradmission.Allowed(reason), OutcomeSkipped
}

// mirrorEphemeral patches the images of the ephemeral containers the
// update adds, by the mirrors of the policies that select the pod; ok is
// false when there is nothing to patch.
func (h *Handler) mirrorEphemeral(ctx context.Context, log logr.Logger, req cradmission.Request, pod, old *corev1.Pod) (cradmission.Response, Outcome, bool) {
	cfg := h.config.Load()
	nsName := cmp.Or(req.Namespace, pod.Namespace)
	if cfg == nil || nsName == "" {
		return cradmission.Response{}, "", false
	}
	ns, known := h.namespaces(ctx, nsName)
	if !known {
		if slices.ContainsFunc(cfg.Policies.Policies, func(p *policy.Policy) bool { return len(p.Mirrors) > 0 }) {
			resp, outcome := errored(log, http.StatusServiceUnavailable,
				fmt.Errorf("namespace %q is not in the webhook's namespace cache yet; retry", nsName))
			return resp, outcome, true
		}
		return cradmission.Response{}, "", false
	}
	ns.Name = nsName
	mutated := pod.DeepCopy()
	items := mutate.EphemeralMirrors(mutated, old, ns, cfg.Policies, cfg.Options)
	if len(items) == 0 {
		return cradmission.Response{}, "", false
	}
	patch, err := h.patch(req.Object.Raw, pod, mutated)
	if err != nil {
		resp, outcome := errored(log, http.StatusInternalServerError, fmt.Errorf("computing the patch: %w", err))
		return resp, outcome, true
	}
	log.V(1).Info("Admission decision", "outcome", OutcomeMutated, "applied", items, "patchBytes", len(patch))
	pt := admissionv1.PatchTypeJSONPatch
	resp := cradmission.Allowed("ephemeral container images mirrored: " + strings.Join(items, ", "))
	resp.Patch, resp.PatchType = patch, &pt
	return resp, OutcomeMutated, true
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
	return schema.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String() + " " + req.Kind.Kind
}

func errored(log logr.Logger, code int32, err error) (cradmission.Response, Outcome) {
	log.Error(err, "Admission request failed", "code", code)
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

// shadowItems lists what shadow policies would change or skipped; an item
// the pod already has is no change.
func shadowItems(res mutate.Result) []string {
	var out []string
	for _, d := range res.Applied {
		if d.Shadow && !d.Present {
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

// requestValues are the key-value pairs of a request-scoped logger.
func requestValues(req *cradmission.Request) []any {
	return []any{"uid", req.UID, "namespace", req.Namespace,
		"operation", req.Operation, "kind", req.Kind.Kind, "dryRun", req.DryRun != nil && *req.DryRun}
}
