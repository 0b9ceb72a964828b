package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestBadReviews posts malformed AdmissionReviews through the webhook: each
// gets an errored AdmissionReview answer, never a panic or a non-review
// body. A review the handler sees is answered with its apiVersion and kind
// and counted as an error; a body controller-runtime's webhook cannot read
// as a review (no API server sends one) is answered by the webhook with
// code 400.
func TestBadReviews(t *testing.T) {
	for _, tc := range []struct {
		name, body, contentType, message string
		handled                          bool // the handler answers it
	}{
		{"malformed JSON", `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {`, "", "unexpected end of JSON input", false},
		{"not JSON at all", "\x00\x01binary", "", "not a JSON object", true},
		{"YAML", "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n", "", "not a JSON object", true},
		{"JSON array", `[1, 2]`, "", "not a JSON object", true},
		{"another content type", `{}`, "application/yaml", "expected application/json", false},
		{"no content type", `{}`, "-", "expected application/json", false},
		{"empty body", ``, "", "not a JSON object", true},
		{"review without request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "", "no request", true},
		{"empty JSON object", `{}`, "", "no request", true},
		{"request without object", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes"}}`, "", "carries no object", true},
		{"object is a string", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":"pod"}}`, "", "decoding the pod", true},
		{"object is a Namespace", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"sandboxes","object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}}}`, "", "decoding the pod", true},
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
			want := 0.0
			if tc.handled {
				want = 1
				if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
					t.Errorf("answered with apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
				}
			}
			if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(OutcomeError))); got != want {
				t.Errorf("counted %v errors, want %v", got, want)
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
