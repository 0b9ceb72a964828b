package admission

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// fuzzPolicies are the memory example plus a disk policy with an overriding
// env var and kept memory volumes, so that patches hold adds, replaces and
// the removals the core intends.
func fuzzPolicies(t testing.TB) *policy.Set {
	t.Helper()
	extra, err := policy.Parse("fuzz.yaml", []byte(`
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: zz-disk
spec:
  mode: disk
  match:
    podSelector:
      matchExpressions:
        - {key: tier, operator: In, values: [gpu, cpu]}
  containers:
    exclude: ["istio-*"]
  caches:
    - name: pip-cache
      mountPath: /root/.cache/pip
      sizeLimit: 512Mi
  keepMemoryVolumes:
    - name: shm
  env:
    - name: PIP_NO_INPUT
      value: "1"
      onConflict: override
  memory:
    limit: 4Gi
    request: 1Gi
    level: container
`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.NewSet(append(memoryPolicies(t).Policies, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// FuzzHandler posts arbitrary bodies to the webhook. Whatever arrives, the
// answer is an AdmissionReview (never a panic); an allowed answer echoes the
// request's uid; a patch applies strictly to the object, yields a Pod, never
// touches the namespace, and the patched pod, admitted again, needs no patch.
func FuzzHandler(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	fx := newFixture(f, fuzzPolicies(f), mutate.Options{ExcludeNamespaces: []string{"own"}})
	f.Fuzz(func(t *testing.T, body []byte) {
		_, review := fx.serveHTTP(t, body)
		resp := review.Response
		if resp.Result != nil && strings.Contains(resp.Result.Message, "panic") {
			t.Fatalf("the handler panicked: %s", resp.Result.Message)
		}
		if !resp.Allowed {
			return
		}
		var in admissionv1.AdmissionReview
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil || in.Request == nil {
			t.Fatalf("allowed a body that does not decode as a review (%v)", err)
		}
		if resp.UID != in.Request.UID {
			t.Fatalf("uid %q, want %q", resp.UID, in.Request.UID)
		}
		if len(resp.Patch) == 0 {
			return
		}
		raw := in.Request.Object.Raw
		checkPatchOps(t, resp.Patch)
		patched, err := applyPatchErr(raw, *resp)
		if err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(patched, &pod); err != nil {
			t.Fatalf("the patched object is not a pod: %v", err)
		}
		again := fx.admit(t, cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID:       types.UID("again"),
			Kind:      in.Request.Kind,
			Resource:  in.Request.Resource,
			Namespace: in.Request.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: patched},
		}})
		if !again.Allowed || len(again.Patch) != 0 {
			t.Fatalf("admitting the patched pod again: allowed=%v patch %s\nfirst patch %s", again.Allowed, again.Patch, resp.Patch)
		}
	})
}

// fuzzSeeds are every corpus pod as a CREATE review, plus a few other
// operations and broken bodies. testdata/fuzz/FuzzHandler holds more.
func fuzzSeeds(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "pods", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus pods (%v)", err)
	}
	var seeds [][]byte
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pod := podJSON(t, string(raw)+"\n")
		var p corev1.Pod
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(pod, &p); err != nil {
			t.Fatal(err)
		}
		ns := p.Namespace
		if ns == "" {
			ns = "sandboxes"
		}
		seeds = append(seeds, reviewBody(t, newRequest(admissionv1.Create, ns, pod)))
	}
	basic := podJSON(t, "basic")
	seeds = append(seeds,
		reviewBody(t, newRequest(admissionv1.Update, "sandboxes", basic)),
		reviewBody(t, newRequest(admissionv1.Create, "own", basic)),
		reviewBody(t, newRequest(admissionv1.Create, "kube-system", basic)),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		[]byte(`{`),
	)
	return seeds
}
