package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestBadReviews posts malformed AdmissionReviews through controller-runtime's
// webhook, as the server does: each gets an errored AdmissionReview answer
// with its apiVersion and kind (without them the API server cannot parse the
// answer and fails the call, so failurePolicy Ignore would admit the pod),
// never a panic or a non-review body.
func TestBadReviews(t *testing.T) {
	valid := string(reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic"))))
	for _, tc := range []struct {
		name    string
		body    string
		code    int32
		message string
	}{
		{"malformed JSON", `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {`, 400, "unexpected end of JSON input"},
		{"not JSON at all", "\x00\x01binary", 400, ""},
		{"wrong kind of review", strings.Replace(valid, `"kind":"AdmissionReview"`, `"kind":"ConfigMap"`, 1), 400, `kind "ConfigMap"`},
		{"wrong apiVersion of review", strings.Replace(valid, `"admission.k8s.io/v1"`, `"admission.k8s.io/v2"`, 1), 400, "admission.k8s.io/v2"},
		{"review without request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400, "no request"},
		{"empty JSON object", `{}`, 400, `got apiVersion "" kind ""`},
		{"long kind of review", `{"kind":"` + strings.Repeat("K", 100) + `"}`, 400, `kind "` + strings.Repeat("K", 64) + `"`},
		{"JSON array", `[1, 2]`, 400, "cannot unmarshal array"},
		{"request without object", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes"}}`, 400, "carries no object"},
		{"object is a string", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":"pod"}}`, 400, "decoding the pod"},
		{"object is a Namespace", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}}}`, 400, "decoding the pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, memoryPolicies(t), mutate.Options{})
			code, review := f.serveHTTP(t, []byte(tc.body))
			resp := review.Response
			if code != http.StatusOK || resp.Allowed || resp.Result == nil || resp.Result.Code != tc.code {
				t.Fatalf("HTTP %d, response %+v; want an errored review with code %d", code, resp.Result, tc.code)
			}
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
				t.Errorf("answered with apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
			}
			if !strings.Contains(resp.Result.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", resp.Result.Message, tc.message)
			}
			if len(resp.Patch) != 0 {
				t.Errorf("an errored answer carries a patch")
			}
			if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(OutcomeError))); got != 1 {
				t.Errorf("counted %v errors, want 1", got)
			}
		})
	}
}

// TestBadRequestsAreAnsweredAsReviews: a body of another content type, or no
// body, gets an errored AdmissionReview the API server can parse too.
func TestBadRequestsAreAnsweredAsReviews(t *testing.T) {
	valid := reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, "basic")))
	for _, tc := range []struct {
		name, contentType, message string
		body                       []byte
	}{
		{"another content type", "application/yaml", `content type "application/yaml"`, valid},
		{"no content type", "", `content type ""`, valid},
		{"empty body", "application/json", "request body is empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, memoryPolicies(t), mutate.Options{})
			r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			w := httptest.NewRecorder()
			f.http.ServeHTTP(w, r)
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
				t.Fatalf("the answer is not an AdmissionReview with a response (%v):\n%s", err, w.Body.String())
			}
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
				t.Errorf("answered with apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
			}
			resp := review.Response
			if w.Code != http.StatusOK || resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest ||
				!strings.Contains(resp.Result.Message, tc.message) {
				t.Errorf("HTTP %d, response %+v; want an errored review with code 400 saying %q", w.Code, resp.Result, tc.message)
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
			p := sandboxPod(1)
			for i := range 10000 {
				p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%05d", i), Value: "v"})
			}
			return p
		},
	}, {
		name: "500 containers",
		pod:  func() *corev1.Pod { return sandboxPod(500) },
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

func sandboxPod(containers int) *corev1.Pod {
	p := &corev1.Pod{}
	p.APIVersion, p.Kind = "v1", "Pod"
	p.Name, p.Namespace = "huge", "sandboxes"
	p.Labels = map[string]string{"app": "sandbox"}
	for i := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%03d", i), Image: "python:3.12-slim"})
	}
	return p
}
