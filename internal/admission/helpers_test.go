package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// repoRoot is where the shared corpus and the example policies live.
const repoRoot = "../.."

// testNamespaces are the namespaces of the shared corpus
// (testdata/namespaces.yaml) plus one used by these tests alone.
func testNamespaces(t testing.TB) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "namespaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.NamespaceList
	if err := yaml.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{
		"kube-system": nil,
		"own":         nil,
	}
	for _, ns := range list.Items {
		out[ns.Name] = ns.Labels
	}
	return out
}

type fixture struct {
	config  atomic.Pointer[Config]
	ns      map[string]map[string]string
	reg     *prometheus.Registry
	handler *Handler
	http    http.Handler
}

func newFixture(t testing.TB, set *policy.Set, opts mutate.Options) *fixture {
	t.Helper()
	f := &fixture{ns: testNamespaces(t), reg: prometheus.NewRegistry()}
	if set != nil {
		f.config.Store(&Config{Policies: set, Options: opts})
	}
	f.handler = NewHandler(&f.config, f.lookup, NewMetrics(f.reg), logr.Discard())
	f.http = f.handler.Webhook()
	return f
}

func (f *fixture) lookup(_ context.Context, name string) (mutate.Namespace, bool) {
	labels, ok := f.ns[name]
	return mutate.Namespace{Name: name, Labels: labels}, ok
}

// admit posts req as the API server would and returns the answer.
func (f *fixture) admit(t testing.TB, req cradmission.Request) cradmission.Response {
	t.Helper()
	_, review := f.serveHTTP(t, reviewBody(t, req))
	return cradmission.Response{AdmissionResponse: *review.Response}
}

// serveHTTP posts body to the webhook and decodes the AdmissionReview answer.
func (f *fixture) serveHTTP(t testing.TB, body []byte) (int, admissionv1.AdmissionReview) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.http.ServeHTTP(w, r)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil {
		t.Fatalf("the answer is not an AdmissionReview: %v\n%s", err, w.Body.String())
	}
	if review.Response == nil {
		t.Fatalf("the AdmissionReview has no response:\n%s", w.Body.String())
	}
	return w.Code, review
}

func loadSet(t testing.TB, paths ...string) *policy.Set {
	t.Helper()
	set, err := policy.Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func parseSet(t testing.TB, yamlText string) *policy.Set {
	t.Helper()
	set, err := policy.ParseSet("test.yaml", []byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func memoryPolicies(t testing.TB) *policy.Set {
	return loadSet(t, filepath.Join(repoRoot, "examples", "policies", "memory"))
}

// podJSON reads a corpus pod (or YAML text) as the JSON the API server sends.
func podJSON(t testing.TB, nameOrYAML string) []byte {
	t.Helper()
	raw := []byte(nameOrYAML)
	if !strings.Contains(nameOrYAML, "\n") {
		var err error
		if raw, err = os.ReadFile(filepath.Join(repoRoot, "testdata", "pods", nameOrYAML+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	out, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newRequest(op admissionv1.Operation, ns string, raw []byte) cradmission.Request {
	return cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("7f0c1a52-0000-4000-8000-000000000001"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: ns,
		Operation: op,
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

// reviewBody encodes req as the AdmissionReview the API server posts.
func reviewBody(t testing.TB, req cradmission.Request) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyPatch applies the response's patch to raw exactly as the API server
// would (strictly: an add under a missing parent fails) and checks what no
// patch of this webhook may do.
func applyPatch(t testing.TB, raw []byte, resp admissionv1.AdmissionResponse) []byte {
	t.Helper()
	if len(resp.Patch) == 0 {
		if resp.PatchType != nil {
			t.Fatalf("patchType %s without a patch", *resp.PatchType)
		}
		return raw
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patchType = %v, want JSONPatch", resp.PatchType)
	}
	checkPatchOps(t, resp.Patch)
	out, err := applyPatchErr(raw, resp)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// applyPatchErr applies the response's patch to raw, if any, and reports
// instead of failing, for use off the test goroutine.
func applyPatchErr(raw []byte, resp admissionv1.AdmissionResponse) ([]byte, error) {
	if len(resp.Patch) == 0 {
		return raw, nil
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		return nil, fmt.Errorf("undecodable patch: %w", err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("the patch does not apply: %w\npatch: %s", err, resp.Patch)
	}
	return out, nil
}

// checkPatchOps fails on a patch that writes the namespace.
func checkPatchOps(t testing.TB, patch []byte) {
	t.Helper()
	var ops []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatalf("patch is not a JSONPatch: %v", err)
	}
	for _, op := range ops {
		if op.Path == "/metadata/namespace" || strings.HasPrefix(op.Path, "/metadata/namespace/") {
			t.Errorf("the patch touches the namespace: %s %s", op.Op, op.Path)
		}
	}
}

func decodePod(t testing.TB, raw []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}
