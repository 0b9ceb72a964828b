package admission

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestBadReviews posts malformed AdmissionReviews through the webhook: each
// gets an errored AdmissionReview answer of code 400 in admission.k8s.io/v1,
// never a panic or a non-review body, and is counted as an error.
func TestBadReviews(t *testing.T) {
	for _, tc := range []struct {
		name, body, contentType, message string
	}{
		{"malformed JSON", `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {`, "", "unexpected end of JSON input"},
		{"not JSON at all", "\x00\x01binary", "", "not a JSON object"},
		{"YAML", "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n", "", "not a JSON object"},
		{"JSON array", `[1, 2]`, "", "not a JSON object"},
		{"another content type", `{}`, "application/yaml", "expected application/json"},
		{"no content type", `{}`, "-", "expected application/json"},
		{"empty body", ``, "", "not a JSON object"},
		{"review without request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "", "no request"},
		{"empty JSON object", `{}`, "", "no request"},
		{"request without object", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes"}}`, "", "carries no object"},
		{"object is a string", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":"pod"}}`, "", "decoding the pod"},
		{"object not a pod's shape", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}}}`, "", "decoding the pod"},
		{"uid a number", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1,"kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","object":{"kind":"Pod"}}}`, "", "decoding the AdmissionReview"},
		{"review of another kind", `{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"kind":"Pod"}}}`, "", "not an AdmissionReview"},
		{"review of another version", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes"}}`, "", "not an AdmissionReview"},
		{"object is a Namespace", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}}}`, "", "decoding the pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, memoryPolicies(t), mutate.Options{})
			r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(tc.body))
			switch tc.contentType {
			case "":
				r.Header.Set("Content-Type", "application/json")
			case "-":
			default:
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			f.http.ServeHTTP(w, r)
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
				t.Fatalf("the answer is not an AdmissionReview with a response (%v):\n%s", err, w.Body.String())
			}
			resp := review.Response
			if w.Code != http.StatusOK || resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest ||
				!strings.Contains(resp.Result.Message, tc.message) || len(resp.Patch) != 0 {
				t.Fatalf("HTTP %d, response %+v; want an errored review with code 400 saying %q", w.Code, resp.Result, tc.message)
			}
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
				t.Errorf("answered with apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
			}
			if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(OutcomeError))); got != 1 {
				t.Errorf("counted %v errors, want 1", got)
			}
		})
	}
}

func TestV1beta1ReviewIsAnsweredInKind(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	body := strings.Replace(string(reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic")))),
		`"admission.k8s.io/v1"`, `"admission.k8s.io/v1beta1"`, 1)
	_, review := f.serveHTTP(t, []byte(body))
	if review.APIVersion != "admission.k8s.io/v1beta1" || !review.Response.Allowed || len(review.Response.Patch) == 0 {
		t.Errorf("answer %s allowed=%v patch=%d bytes", review.APIVersion, review.Response.Allowed, len(review.Response.Patch))
	}
}

func TestHugePods(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	for _, tc := range []struct {
		name string
		pod  func() *corev1.Pod
	}{{
		name: "10000 env vars",
		pod: func() *corev1.Pod {
			p := hugePod(1)
			for i := range 10000 {
				p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%05d", i), Value: "v"})
			}
			return p
		},
	}, {
		name: "500 containers",
		pod:  func() *corev1.Pod { return hugePod(500) },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod())
			if err != nil {
				t.Fatal(err)
			}
			code, review := f.serveHTTP(t, reviewBody(t, newRequest(admissionv1.Create, "sandboxes", raw)))
			if code != http.StatusOK || !review.Response.Allowed {
				t.Fatalf("HTTP %d, %+v", code, review.Response.Result)
			}
			pod := decodePod(t, applyPatch(t, raw, *review.Response))
			want := tc.pod()
			for i, c := range pod.Spec.Containers {
				if env(c, "UV_LINK_MODE") != "copy" || len(c.Env) != len(want.Spec.Containers[i].Env)+1 {
					t.Fatalf("container %s: %d env vars, UV_LINK_MODE=%q", c.Name, len(c.Env), env(c, "UV_LINK_MODE"))
				}
			}
		})
	}
}

// TestUnknownFieldsSurvive sends a pod with fields this build's k8s.io/api
// does not know (a newer Kubernetes): the typed round trip drops them, and
// the patch must not remove them.
func TestUnknownFieldsSurvive(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	raw := []byte(`{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "future", "namespace": "sandboxes", "labels": {"app": "sandbox"}, "futureMeta": "m"},
  "spec": {
    "futureSpecField": {"enabled": true},
    "containers": [{"name": "main", "image": "python:3.12-slim", "futureContainerField": [1, 2],
                    "env": [{"name": "A", "value": "1", "futureEnvField": "e"}]}],
    "volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory", "futureEmptyDirField": 1}}]
  },
  "futureTopLevel": "t"
}`)
	resp := f.admit(t, newRequest(admissionv1.Create, "sandboxes", raw))
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Fatalf("not mutated: %+v", resp.Result)
	}
	var ops []struct{ Op, Path string }
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Op == "remove" && strings.Contains(strings.ToLower(op.Path), "future") {
			t.Errorf("the patch removes an unknown field: %s %s", op.Op, op.Path)
		}
	}
	var out map[string]any
	if err := json.Unmarshal(applyPatch(t, raw, resp.AdmissionResponse), &out); err != nil {
		t.Fatal(err)
	}
	spec := out["spec"].(map[string]any)
	c := spec["containers"].([]any)[0].(map[string]any)
	for what, present := range map[string]bool{
		"futureTopLevel":       out["futureTopLevel"] != nil,
		"futureMeta":           out["metadata"].(map[string]any)["futureMeta"] != nil,
		"futureSpecField":      spec["futureSpecField"] != nil,
		"futureContainerField": c["futureContainerField"] != nil,
		"futureEnvField":       c["env"].([]any)[0].(map[string]any)["futureEnvField"] != nil,
	} {
		if !present {
			t.Errorf("%s was lost", what)
		}
	}
}

// hugePod is a sandbox pod with containers containers, c000 onwards, as
// an AdmissionReview carries it (apiVersion and kind set).
func hugePod(containers int) *corev1.Pod {
	p := testkit.SandboxPod("sandboxes", "huge")
	p.APIVersion, p.Kind = "v1", "Pod"
	p.Spec.Containers = nil
	for i := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%03d", i), Image: "python:3.12-slim"})
	}
	return p
}

// TestReadsReviewsAsControllerRuntime: the webhook, which reads a review and
// its pod in one pass, answers every review as controller-runtime's
// admission webhook around the same handler answers it: each corpus pod as
// the API server encodes it and as its YAML reads, in v1 and v1beta1
// reviews, and reviews that name the request or its object twice, whose
// object is of another kind or not a pod's shape, or whose request is not
// a pod's CREATE.
func TestReadsReviewsAsControllerRuntime(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	stock := &cradmission.Webhook{Handler: f.handler}
	answer := func(h http.Handler, body string) string {
		r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("not an answer (%v): %s", err, w.Body.String())
		}
		b, err := json.Marshal(review)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bodies := map[string]string{}
	files, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "pods", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus pods: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		yamlJSON := podJSON(t, name)
		var pod corev1.Pod
		if err := json.Unmarshal(yamlJSON, &pod); err != nil {
			t.Fatal(err)
		}
		pod.APIVersion, pod.Kind = "v1", "Pod"
		typed, err := json.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		ns := cmp.Or(pod.Namespace, "sandboxes")
		bodies[name+"/typed"] = string(reviewBody(t, newRequest(admissionv1.Create, ns, typed)))
		bodies[name+"/yaml"] = string(reviewBody(t, newRequest(admissionv1.Create, ns, yamlJSON)))
		bodies[name+"/v1beta1"] = strings.Replace(bodies[name+"/typed"], `"admission.k8s.io/v1"`, `"admission.k8s.io/v1beta1"`, 1)
		bodies[name+"/update"] = string(reviewBody(t, newRequest(admissionv1.Update, ns, typed)))
	}
	typical := string(podJSON(t, "basic"))
	head := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes",`
	for name, body := range map[string]string{
		"two objects":                    head + `"object":{"kind":"Service"},"object":` + typical + `}}`,
		"two objects, pod first":         head + `"object":` + typical + `,"object":{"metadata":{"name":"second","labels":{"app":"sandbox"}}}}}`,
		"an escaped object key":          head + `"object":{"kind":"Service"},"obj\u0065ct":` + typical + `}}`,
		"an escaped request key":         `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"first","object":{"kind":"Service"}},"r\u0065quest":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":` + typical + `}}`,
		"two requests":                   `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"first"},"request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":` + typical + `}}`,
		"a Deployment":                   `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":1,"template":{}}}}}`,
		"a ConfigMap, not a pod's shape": `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"ConfigMap"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"ConfigMap","spec":"x","data":{"a":"b"}}}}`,
		"object a Namespace":             head + `"object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}}}`,
		"a response object":              `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"object":{}},"request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":` + typical + `}}`,
		"no apiVersion":                  `{"kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":` + typical + `}}`,
	} {
		bodies[name] = body
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			got, want := answer(f.http, body), answer(stock, body)
			if name == "no apiVersion" {
				// The one difference: controller-runtime's webhook
				// answers in the empty apiVersion the review has, which
				// no API server reads; the webhook in v1, as it answers
				// a review it cannot read.
				want = strings.Replace(want, `"kind":"AdmissionReview",`, `"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1",`, 1)
			}
			if got != want {
				t.Errorf("answered\n%s\ncontroller-runtime's webhook answers\n%s", got, want)
			}
		})
	}
}
