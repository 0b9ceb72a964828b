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

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestFastPathIsTheGeneralPath sends every corpus pod under every policy
// set, the benchmark pods and a set of odd and malformed reviews through
// HTTPHandler and through the general path alone (controller-runtime's
// webhook behind the review type check), each on a fresh handler, and
// requires the same HTTP status, body, request metrics and log lines at
// debug level. Reviews as the API server sends them must take the fast
// path; the odd ones must not.
func TestFastPathIsTheGeneralPath(t *testing.T) {
	type tc struct {
		name string
		body []byte
		ct   string
		fast bool // serveFast must answer it
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
			tc{name: c.Set.Name + "/" + c.Name + "/typed", body: reviewBody(t, newRequest(admissionv1.Create, ns, typed)), fast: true},
			tc{name: c.Set.Name + "/" + c.Name + "/yaml", body: reviewBody(t, newRequest(admissionv1.Create, ns, raw)), fast: true})
	}
	for _, c := range benchdata.Cases() {
		cases = append(cases, tc{name: "bench/" + c.Name, body: benchdata.Review(c.Pod), fast: true})
	}
	valid := string(reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic"))))
	odd := []tc{
		{name: "v1beta1", body: []byte(strings.Replace(valid, `"admission.k8s.io/v1"`, `"admission.k8s.io/v1beta1"`, 1)), fast: true},
		{name: "update", body: reviewBody(t, newRequest(admissionv1.Update, "sandboxes", podJSON(t, "basic"))), fast: true},
		{name: "unknown namespace", body: reviewBody(t, newRequest(admissionv1.Create, "brand-new", podJSON(t, "basic"))), fast: true},
		{name: "kube-system", body: reviewBody(t, newRequest(admissionv1.Create, "kube-system", podJSON(t, "basic"))), fast: true},
		{name: "object null", body: []byte(strings.Replace(valid, `"object":{`, `"object":null,"x":{`, 1)), fast: true},
		{name: "pod without apiVersion and kind", body: []byte(strings.Replace(valid, `"object":{"apiVersion":"v1","kind":"Pod",`, `"object":{`, 1)), fast: true},
		{name: "review without request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), fast: true},
		{name: "request null", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`), fast: true},
		{name: "text/plain", body: []byte(valid), ct: "text/plain"},
		{name: "Kind in another case", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","Kind":"ConfigMap"`, 1))},
		{name: "kind spelled with an escape", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","\u006bind":"AdmissionReview"`, 1))},
		{name: "kind twice", body: []byte(strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"AdmissionReview","kind":"AdmissionReview"`, 1))},
		{name: "pod KIND", body: []byte(strings.Replace(valid, `"object":{"apiVersion":"v1","kind":"Pod",`, `"object":{"apiVersion":"v1","kind":"Pod","KIND":"Namespace",`, 1))},
		{name: "pod of apiVersion v2", body: []byte(strings.Replace(valid, `"object":{"apiVersion":"v1"`, `"object":{"apiVersion":"v2"`, 1))},
		{name: "object twice", body: []byte(strings.Replace(valid, `"object":{`, `"object":null,"object":{`, 1))},
		{name: "escaped key in the request", body: []byte(strings.Replace(valid, `"namespace":"sandboxes"`, `"n\u0061mespace":"sandboxes"`, 1))},
		{name: "request twice", body: []byte(strings.Replace(valid, `"request":{`, `"request":{"uid":"x"},"request":{`, 1))},
		{name: "request, then null", body: []byte(strings.TrimSuffix(valid, "}") + `,"request":null}`)},
	}
	cases = append(cases, odd...)
	for _, b := range []struct{ name, body string }{
		{"malformed JSON", `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {`},
		{"not JSON at all", "\x00\x01binary"},
		{"empty body", ""},
		{"wrong kind of review", strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"ConfigMap"`, 1)},
		{"wrong apiVersion of review", strings.Replace(valid, `"admission.k8s.io/v1"`, `"admission.k8s.io/v2"`, 1)},
		{"empty JSON object", `{}`},
		{"JSON array", `[1, 2]`},
		{"object is a string", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":"pod"}}`},
		{"object is a Namespace", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}}}`},
		{"object of a wrong type", strings.Replace(valid, `"containers":[`, `"containers":7,"x":[`, 1)},
	} {
		cases = append(cases, tc{name: b.name, body: []byte(b.body)})
	}

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
			fast := serveAll(t, set, opts, c.body, ct, false)
			general := serveAll(t, set, opts, c.body, ct, true)
			if d := cmp.Diff(general, fast); d != "" {
				t.Errorf("the handler and the general path differ (-general +handler):\n%s", d)
			}
			f := newFixture(t, set, opts)
			took := f.handler.serveFast(httptest.NewRecorder(), post(c.body, ct), logr.Discard(), c.body)
			if took != c.fast {
				t.Errorf("serveFast took the review: %v, want %v", took, c.fast)
			}
		})
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

func serveAll(t *testing.T, set *policy.Set, opts mutate.Options, body []byte, ct string, generalOnly bool) answer {
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
	if generalOnly {
		f.handler.serveGeneral(w, post(body, ct), f.handler.Webhook(log), log.WithName("admission"), body)
	} else {
		f.handler.HTTPHandler(log).ServeHTTP(w, post(body, ct))
	}
	a := answer{Code: w.Code, Header: w.Header(), Body: w.Body.String(), Counts: map[Outcome]float64{}}
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

// TestFastPathCountsPanics: a panic on the fast path is answered and
// counted as on the general path.
func TestFastPathCountsPanics(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	f.handler.namespaces = func(context.Context, string) (mutate.Namespace, bool) { panic("boom") }
	body := reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic")))
	w := httptest.NewRecorder()
	if !f.handler.serveFast(w, post(body, "application/json"), logr.Discard(), body) {
		t.Fatal("the fast path declined a plain review")
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
		t.Fatalf("%v: %s", err, w.Body.String())
	}
	if review.Response.Allowed || review.Response.Result.Code != http.StatusInternalServerError || !strings.Contains(review.Response.Result.Message, "boom") {
		t.Errorf("response %+v", review.Response.Result)
	}
	if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(OutcomeError))); got != 1 {
		t.Errorf("errors counted: %v", got)
	}
}

// FuzzFastPath posts arbitrary bodies to the handler and to the general
// path alone: the answers, the counts and the log lines must be the same.
// Seeds: the corpus reviews of FuzzHandler, the same with each pod in its
// typed encoding (as the API server sends it), and the benchmark reviews.
func FuzzFastPath(f *testing.F) {
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
		fast := serveAll(t, set, opts, body, "application/json", false)
		general := serveAll(t, set, opts, body, "application/json", true)
		if d := cmp.Diff(general, fast); d != "" {
			t.Errorf("the handler and the general path differ (-general +handler):\n%s", d)
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
