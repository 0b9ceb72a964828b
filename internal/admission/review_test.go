package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/internal/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestReviewIsControllerRuntimesWebhook sends every corpus pod under every
// policy set, the benchmark pods and reviews of other requests through the
// handler's one path, and through controller-runtime's admission webhook
// deciding with the same handle (the decoding the handler replaced, kept
// here as the reference), each on a fresh handler, and requires the same
// HTTP status, body, request metrics and log lines at debug level. Reviews
// no API server sends (keys a case-insensitive reader could take for
// apiVersion or kind, keys named twice, another content type, a body that is
// no review) get an errored review with code 400 instead, counted as an
// error.
func TestReviewIsControllerRuntimesWebhook(t *testing.T) {
	type tc struct {
		name     string
		body     []byte
		ct       string
		rejected string // the handler refuses it with this message
	}
	var cases []tc
	sets := map[string]string{}
	for _, c := range golden.Cases(t) {
		raw, pod := golden.Pod(t, c.Input)
		typed, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		ns := pod.Namespace
		sets[c.Set.Name+"/"+c.Name] = c.Set.Name
		cases = append(cases,
			tc{name: c.Set.Name + "/" + c.Name + "/typed", body: reviewBody(t, newRequest(admissionv1.Create, ns, typed))},
			tc{name: c.Set.Name + "/" + c.Name + "/yaml", body: reviewBody(t, newRequest(admissionv1.Create, ns, raw))})
	}
	for _, c := range benchdata.Cases() {
		cases = append(cases, tc{name: "bench/" + c.Name, body: benchdata.Review(c.Pod)})
	}
	valid := string(reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic"))))
	const ambiguous = "names a key twice, or spells apiVersion or kind in another case or with an escape"
	odd := []tc{
		{name: "v1beta1", body: []byte(strings.Replace(valid, `"admission.k8s.io/v1"`, `"admission.k8s.io/v1beta1"`, 1))},
		{name: "update", body: reviewBody(t, newRequest(admissionv1.Update, "sandboxes", podJSON(t, "basic")))},
		{name: "unknown namespace", body: reviewBody(t, newRequest(admissionv1.Create, "brand-new", podJSON(t, "basic")))},
		{name: "kube-system", body: reviewBody(t, newRequest(admissionv1.Create, "kube-system", podJSON(t, "basic")))},
		{name: "object null", body: []byte(strings.Replace(valid, `"object":{`, `"object":null,"x":{`, 1))},
		{name: "pod without apiVersion and kind", body: []byte(strings.Replace(valid, `"object":{"apiVersion":"v1","kind":"Pod",`, `"object":{`, 1))},
		{name: "review without request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)},
		{name: "request null", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`)},
		{name: "pod of apiVersion v2", body: []byte(strings.Replace(valid, `"object":{"apiVersion":"v1"`, `"object":{"apiVersion":"v2"`, 1))},
		{name: "object is a string", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":"pod"}}`)},
		{name: "object is a Namespace", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}}}`)},
		{name: "object of a wrong type", body: []byte(strings.Replace(valid, `"containers":[`, `"containers":7,"x":[`, 1))},
		{name: "text/plain", body: []byte(valid), ct: "text/plain", rejected: `content type "text/plain"`},
		{name: "Kind in another case", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","Kind":"ConfigMap"`, 1)), rejected: ambiguous},
		{name: "kind spelled with an escape", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","\u006bind":"AdmissionReview"`, 1)), rejected: ambiguous},
		{name: "kind twice", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","kind":"AdmissionReview"`, 1)), rejected: ambiguous},
		{name: "pod KIND", body: []byte(strings.Replace(valid, `"object":{"apiVersion":"v1","kind":"Pod",`, `"object":{"apiVersion":"v1","kind":"Pod","KIND":"Namespace",`, 1)), rejected: ambiguous},
		{name: "object twice", body: []byte(strings.Replace(valid, `"object":{`, `"object":null,"object":{`, 1)), rejected: ambiguous},
		{name: "escaped key in the request", body: []byte(strings.Replace(valid, `"namespace":"sandboxes"`, `"n\u0061mespace":"sandboxes"`, 1)), rejected: ambiguous},
		{name: "request twice", body: []byte(strings.Replace(valid, `"request":{`, `"request":{"uid":"x"},"request":{`, 1)), rejected: ambiguous},
		{name: "request, then null", body: []byte(strings.TrimSuffix(valid, "}") + `,"request":null}`), rejected: ambiguous},
		{name: "malformed JSON", body: []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {`), rejected: "unexpected end of JSON input"},
		{name: "not JSON at all", body: []byte("\x00\x01binary"), rejected: "decoding the AdmissionReview"},
		{name: "empty body", body: []byte(""), rejected: "request body is empty"},
		{name: "wrong kind of review", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"ConfigMap"`, 1)), rejected: `kind "ConfigMap"`},
		{name: "wrong apiVersion of review", body: []byte(strings.Replace(valid, `"admission.k8s.io/v1"`, `"admission.k8s.io/v2"`, 1)), rejected: `apiVersion "admission.k8s.io/v2"`},
		{name: "empty JSON object", body: []byte(`{}`), rejected: `got apiVersion "" kind ""`},
		{name: "JSON array", body: []byte(`[1, 2]`), rejected: "cannot unmarshal array"},
	}
	cases = append(cases, odd...)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set, opts := memoryPolicies(t), mutate.Options{}
			if s, ok := sets[strings.TrimSuffix(strings.TrimSuffix(c.name, "/typed"), "/yaml")]; ok {
				set, opts = goldenSet(t, s)
			}
			ct := c.ct
			if ct == "" {
				ct = "application/json"
			}
			got := serveAll(t, set, opts, c.body, ct, false)
			if c.rejected != "" {
				checkRejected(t, got, c.rejected)
				return
			}
			want := serveAll(t, set, opts, c.body, ct, true)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the handler and controller-runtime's webhook differ (-webhook +handler):\n%s", d)
			}
		})
	}
}

// checkRejected fails unless a is an errored review with code 400 saying
// message, counted as one error and logged as one rejection.
func checkRejected(t *testing.T, a answer, message string) {
	t.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal([]byte(a.Body), &review); err != nil || review.Response == nil {
		t.Fatalf("not an AdmissionReview answer (%v): %s", err, a.Body)
	}
	resp := review.Response
	if a.Code != http.StatusOK || review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" ||
		resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || len(resp.Patch) != 0 ||
		!strings.Contains(resp.Result.Message, message) {
		t.Errorf("HTTP %d %s; want an errored admission.k8s.io/v1 AdmissionReview with code 400 saying %q", a.Code, a.Body, message)
	}
	want := map[Outcome]float64{OutcomeMutated: 0, OutcomeUnchanged: 0, OutcomeSkipped: 0, OutcomeDenied: 0, OutcomeError: 1}
	if d := cmp.Diff(want, a.Counts); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	if len(a.LogLine) != 1 || !strings.Contains(a.LogLine[0], "Rejected a request that is not an AdmissionReview") {
		t.Errorf("log lines %q, want one rejection", a.LogLine)
	}
}

// answer is everything a client or an operator sees of one request.
type answer struct {
	Code    int
	Header  http.Header
	Body    string
	Counts  map[Outcome]float64
	LogLine []string
}

// serveAll posts body to a fresh handler, through controller-runtime's
// webhook when reference is set.
func serveAll(t *testing.T, set *policy.Set, opts mutate.Options, body []byte, ct string, reference bool) answer {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+withoutStack(args))
	}, funcr.Options{Verbosity: 1})
	f := newFixture(t, set, opts)
	w := httptest.NewRecorder()
	if reference {
		referenceWebhook(f.handler, log).ServeHTTP(w, post(body, ct))
	} else {
		serveBody(f.handler.Review(log)).ServeHTTP(w, post(body, ct))
	}
	a := answer{Code: w.Code, Header: w.Header(), Body: w.Body.String(), Counts: map[Outcome]float64{}}
	if reference && a.Header.Get("Content-Type") == "text/plain; charset=utf-8" {
		// controller-runtime leaves the Content-Type to net/http's sniffing;
		// the handler names it.
		a.Header.Set("Content-Type", "application/json")
	}
	for _, o := range []Outcome{OutcomeMutated, OutcomeUnchanged, OutcomeSkipped, OutcomeDenied, OutcomeError} {
		a.Counts[o] = testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(o)))
	}
	mu.Lock()
	a.LogLine = lines
	mu.Unlock()
	return a
}

// withoutStack drops the goroutine stack of a panic log line, which
// differs by call path.
func withoutStack(args string) string {
	if i := strings.Index(args, `"stack"=`); i >= 0 {
		return args[:i]
	}
	return args
}

func post(body []byte, ct string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", ct)
	return r
}

func goldenSet(t *testing.T, name string) (*policy.Set, mutate.Options) {
	t.Helper()
	for _, s := range golden.Sets {
		if s.Name != name {
			continue
		}
		lm, ok := mutate.ParseLeakMitigation(s.LeakMitigation)
		if !ok {
			t.Fatalf("leak mitigation %q", s.LeakMitigation)
		}
		return golden.Policies(t, s.Policies...), mutate.Options{LeakMitigation: lm}
	}
	t.Fatalf("no corpus set %s", name)
	return nil, mutate.Options{}
}

// referenceWebhook is controller-runtime's admission webhook deciding with
// h's handle: it decodes the review and its pod with the universal
// deserializer, and hands handle a request-scoped logger in the context.
func referenceWebhook(h *Handler, log logr.Logger) *cradmission.Webhook {
	return &cradmission.Webhook{
		Handler: cradmission.HandlerFunc(func(ctx context.Context, req cradmission.Request) cradmission.Response {
			// A request-scoped logger that has the request's values already.
			l := &lazyLog{base: logf.FromContext(ctx), req: &req}
			built := l.base
			l.built = &built
			return h.handleTimed(ctx, time.Now(), l, req, nil)
		}),
		LogConstructor: func(_ logr.Logger, req *cradmission.Request) logr.Logger {
			l := log.WithName("admission")
			if req == nil {
				return l
			}
			return l.WithValues(requestValues(req)...)
		},
	}
}

// FuzzReview posts arbitrary bodies to the handler and to controller-runtime's
// webhook (see TestReviewIsControllerRuntimesWebhook): for a body the
// handler takes as a review, the answers, the counts and the log lines must
// be the same; any other gets an errored review with code 400.
// Seeds: the corpus reviews of FuzzHandler, the same with each pod in its
// typed encoding (as the API server sends it), and the benchmark reviews.
func FuzzReview(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
		var review admissionv1.AdmissionReview
		if json.Unmarshal(seed, &review) == nil && review.Request != nil && len(review.Request.Object.Raw) > 0 {
			var pod corev1.Pod
			if json.Unmarshal(review.Request.Object.Raw, &pod) == nil {
				typed, err := json.Marshal(&pod)
				if err != nil {
					f.Fatal(err)
				}
				review.Request.Object.Raw = typed
				b, err := json.Marshal(review)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(b)
			}
		}
	}
	for _, c := range benchdata.Cases() {
		f.Add(benchdata.Review(c.Pod))
	}
	set := fuzzPolicies(f)
	opts := mutate.Options{ExcludeNamespaces: []string{"own"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := serveAll(t, set, opts, body, "application/json", false)
		if _, _, _, err := decodeReview(body); err != nil {
			checkRejected(t, got, err.Error())
			return
		}
		want := serveAll(t, set, opts, body, "application/json", true)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("the handler and controller-runtime's webhook differ (-webhook +handler):\n%s", d)
		}
	})
}

// TestScanReview pins what the scanner finds and refuses, strings with
// escapes and quotes included.
func TestScanReview(t *testing.T) {
	for _, c := range []struct {
		name, body, object string
		ok                 bool
	}{
		{"plain", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"kind":"Pod","a":"x"},"dryRun":false}}`, `{"kind":"Pod","a":"x"}`, true},
		{"spaces", ` { "kind" : "AdmissionReview" , "request" : { "object" : { "kind" : "Pod" } } } `, `{ "kind" : "Pod" }`, true},
		{"quotes and braces in strings", `{"request":{"x":"a\"}{[","object":{"s":"\\\\","t":"\\\"}"},"y":"\\"}}`, `{"s":"\\\\","t":"\\\"}"}`, true},
		{"no request", `{"kind":"AdmissionReview"}`, ``, true},
		{"object null", `{"request":{"object":null}}`, ``, true},
		{"object in an array is not it", `{"request":{"a":[{"object":{}}]}}`, ``, true},
		{"Kind", `{"Kind":"x","request":{}}`, ``, false},
		{"KIND in the pod", `{"request":{"object":{"KIND":"Namespace"}}}`, ``, false},
		{"kelvin sign", "{\"\u212aind\":\"x\"}", ``, false},
		{"escaped key", `{"\u006bind":"x"}`, ``, false},
		{"escaped key in the request", `{"request":{"\u006fbject":{}}}`, ``, false},
		{"object twice", `{"request":{"object":{},"object":{}}}`, ``, false},
		{"request twice", `{"request":null,"request":{}}`, ``, false},
		{"apiVersion twice in the pod", `{"request":{"object":{"apiVersion":"v1","apiVersion":"v1"}}}`, ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !json.Valid([]byte(c.body)) {
				t.Fatalf("not valid JSON: %s", c.body)
			}
			object, ok := scanReview([]byte(c.body))
			if ok != c.ok || string(object) != c.object {
				t.Errorf("scanReview = %q, %v; want %q, %v", object, ok, c.object, c.ok)
			}
		})
	}
}
