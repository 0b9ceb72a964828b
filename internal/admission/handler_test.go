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
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func TestHandle(t *testing.T) {
	set := memoryPolicies(t)
	opts := mutate.Options{ExcludeNamespaces: []string{"own"}}
	withoutNamespace := func(raw []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m["metadata"].(map[string]any), "namespace")
		out, _ := json.Marshal(m)
		return out
	}

	for _, tc := range []struct {
		name    string
		req     func() (cradmission.Request, []byte) // the request and the object to patch
		outcome Outcome
		allowed bool
		code    int32
		patched bool
		message string // substring of Result.Message
		warning string // substring of one warning
		check   func(t *testing.T, pod *corev1.Pod)
	}{{
		name:    "sandbox pod at CREATE is mutated",
		req:     func() (cradmission.Request, []byte) { return create("sandboxes", podJSON(t, "basic")) },
		outcome: OutcomeMutated, allowed: true, code: 200, patched: true,
		message: "mutated by sandbox-seed",
		check: func(t *testing.T, pod *corev1.Pod) {
			v := volume(pod, "uv-cache")
			if v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory ||
				v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("1Gi")) != 0 {
				t.Errorf("uv-cache volume = %+v", v)
			}
			if got := env(pod.Spec.Containers[0], "UV_LINK_MODE"); got != "copy" {
				t.Errorf("UV_LINK_MODE = %q", got)
			}
			if pod.Spec.Resources == nil || pod.Spec.Resources.Limits.Memory().Cmp(resource.MustParse("8Gi")) != 0 {
				t.Errorf("pod-level resources = %+v", pod.Spec.Resources)
			}
			if pod.Namespace != "sandboxes" {
				t.Errorf("namespace = %q", pod.Namespace)
			}
		},
	}, {
		name: "a dry run is answered like any request",
		req: func() (cradmission.Request, []byte) {
			r, raw := create("sandboxes", podJSON(t, "basic"))
			r.DryRun = ptr.To(true)
			return r, raw
		},
		outcome: OutcomeMutated, allowed: true, code: 200, patched: true,
	}, {
		name: "a pod without metadata.namespace gets no namespace from the patch",
		req: func() (cradmission.Request, []byte) {
			return create("sandboxes", withoutNamespace(podJSON(t, "basic")))
		},
		outcome: OutcomeMutated, allowed: true, code: 200, patched: true,
		check: func(t *testing.T, pod *corev1.Pod) {
			if pod.Namespace != "" {
				t.Errorf("the patch set the namespace to %q", pod.Namespace)
			}
			if volume(pod, "uv-cache") == nil {
				t.Error("no uv-cache volume")
			}
		},
	}, {
		name:    "generateName pods are mutated",
		req:     func() (cradmission.Request, []byte) { return create("sandboxes", podJSON(t, "generate-name")) },
		outcome: OutcomeMutated, allowed: true, code: 200, patched: true,
	}, {
		name:    "a pod no policy selects is allowed unchanged",
		req:     func() (cradmission.Request, []byte) { return create("sandboxes", podJSON(t, "not-sandbox")) },
		outcome: OutcomeUnchanged, allowed: true, code: 200,
		message: "no enforced policy matches the pod",
	}, {
		name: "an already mutated pod is allowed unchanged",
		req: func() (cradmission.Request, []byte) {
			f := newFixture(t, set, opts)
			r, raw := create("sandboxes", podJSON(t, "basic"))
			return create("sandboxes", applyPatch(t, raw, f.admit(t, r).AdmissionResponse))
		},
		outcome: OutcomeUnchanged, allowed: true, code: 200,
		message: "already has everything",
	}, {
		name:    "a pod that sets UV_LINK_MODE itself gets a warning",
		req:     func() (cradmission.Request, []byte) { return create("sandboxes", podJSON(t, "uv-link-mode-set")) },
		outcome: OutcomeMutated, allowed: true, code: 200, patched: true,
		warning: "UV_LINK_MODE",
		check: func(t *testing.T, pod *corev1.Pod) {
			if got := env(pod.Spec.Containers[0], "UV_LINK_MODE"); got != "hardlink" {
				t.Errorf("UV_LINK_MODE = %q, want the pod's own value", got)
			}
		},
	}, {
		name: "reinvoked with a late container mounting the injected host path writable is denied",
		req: func() (cradmission.Request, []byte) {
			first := mutate.Pod(decodePod(t, podJSON(t, "basic")), mutate.Namespace{Name: "sandboxes"}, set, opts).Pod.DeepCopy()
			first.Spec.Containers = append(first.Spec.Containers, corev1.Container{
				Name: "late", Image: "i", VolumeMounts: []corev1.VolumeMount{{Name: "rebench-v2", MountPath: "/data"}},
			})
			raw, err := json.Marshal(first)
			if err != nil {
				t.Fatal(err)
			}
			return create("sandboxes", raw)
		},
		outcome: OutcomeDenied, allowed: false, code: 403,
		message: `container "late" mounts hostPath volume "rebench-v2" writable at "/data"`,
	}, {
		name:    "UPDATE is not mutated",
		req:     func() (cradmission.Request, []byte) { return op(admissionv1.Update, "sandboxes", podJSON(t, "basic")) },
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "only at CREATE, not UPDATE",
	}, {
		name:    "DELETE is not mutated",
		req:     func() (cradmission.Request, []byte) { return op(admissionv1.Delete, "sandboxes", nil) },
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "only at CREATE, not DELETE",
	}, {
		name: "an ephemeral containers update with nothing to refuse or mirror is allowed unchanged",
		req: func() (cradmission.Request, []byte) {
			r, raw := op(admissionv1.Update, "sandboxes", podJSON(t, "basic"))
			r.SubResource = "ephemeralcontainers"
			return r, raw
		},
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "no image of one is mirrored",
	}, {
		name: "other kinds are not mutated",
		req: func() (cradmission.Request, []byte) {
			r, raw := create("sandboxes", []byte(`{"apiVersion":"apps/v1","kind":"Deployment"}`))
			r.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
			return r, raw
		},
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "only Pods, not apps/v1 Deployment",
	}, {
		name:    "kube-system is never mutated",
		req:     func() (cradmission.Request, []byte) { return create("kube-system", podJSON(t, "basic")) },
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "kube-system",
	}, {
		name:    "an excluded namespace is not mutated",
		req:     func() (cradmission.Request, []byte) { return create("own", podJSON(t, "basic")) },
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "namespace own is excluded",
	}, {
		name:    "Windows pods are not mutated",
		req:     func() (cradmission.Request, []byte) { return create("sandboxes", podJSON(t, "windows")) },
		outcome: OutcomeSkipped, allowed: true, code: 200,
		message: "Windows",
	}, {
		name:    "a namespace missing from the cache is an error",
		req:     func() (cradmission.Request, []byte) { return create("brand-new", podJSON(t, "basic")) },
		outcome: OutcomeError, allowed: false, code: http.StatusServiceUnavailable,
		message: `namespace "brand-new" is not in the webhook's namespace cache`,
	}, {
		name: "a request without uid is an error",
		req: func() (cradmission.Request, []byte) {
			r, raw := create("sandboxes", podJSON(t, "basic"))
			r.UID = ""
			return r, raw
		},
		outcome: OutcomeError, allowed: false, code: http.StatusBadRequest,
		message: "no uid",
	}, {
		name:    "a CREATE without object is an error",
		req:     func() (cradmission.Request, []byte) { return create("sandboxes", nil) },
		outcome: OutcomeError, allowed: false, code: http.StatusBadRequest,
		message: "carries no object",
	}, {
		name: "an object that is not a Pod is an error",
		req: func() (cradmission.Request, []byte) {
			return create("sandboxes", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`))
		},
		outcome: OutcomeError, allowed: false, code: http.StatusBadRequest,
		message: "decoding the pod",
	}, {
		name: "an object of the wrong version is an error",
		req: func() (cradmission.Request, []byte) {
			return create("sandboxes", []byte(`{"apiVersion":"v2","kind":"Pod"}`))
		},
		outcome: OutcomeError, allowed: false, code: http.StatusBadRequest,
		message: "decoding the pod",
	}, {
		name: "malformed object JSON is an error",
		req: func() (cradmission.Request, []byte) {
			return create("sandboxes", []byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`))
		},
		outcome: OutcomeError, allowed: false, code: http.StatusBadRequest,
		message: "decoding the pod",
	}, {
		name: "an empty pod object is allowed unchanged",
		req:  func() (cradmission.Request, []byte) { return create("sandboxes", []byte(`{}`)) },
		// The deserializer takes apiVersion and kind from the typed
		// target; a pod with no labels matches no policy.
		outcome: OutcomeUnchanged, allowed: true, code: 200,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, set, opts)
			req, raw := tc.req()
			resp := f.admit(t, req)
			if resp.UID != req.UID {
				t.Errorf("uid = %q, want %q", resp.UID, req.UID)
			}
			if resp.Allowed != tc.allowed || resp.Result == nil || resp.Result.Code != tc.code {
				t.Fatalf("allowed=%v result=%+v, want allowed=%v code=%d", resp.Allowed, resp.Result, tc.allowed, tc.code)
			}
			if !strings.Contains(resp.Result.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", resp.Result.Message, tc.message)
			}
			if got := len(resp.Patch) > 0; got != tc.patched {
				t.Fatalf("patched = %v, want %v (patch %s)", got, tc.patched, resp.Patch)
			}
			if tc.warning != "" && !containsSubstring(resp.Warnings, tc.warning) {
				t.Errorf("warnings = %q, want one containing %q", resp.Warnings, tc.warning)
			}
			if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(tc.outcome))); got != 1 {
				t.Errorf("sandbox_webhook_admission_requests_total{outcome=%q} = %v, want 1", tc.outcome, got)
			}
			if tc.check != nil {
				tc.check(t, decodePod(t, applyPatch(t, raw, resp.AdmissionResponse)))
			}
		})
	}
}

func TestDryRunGetsTheSamePatch(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	req, _ := create("sandboxes", podJSON(t, "basic"))
	plain := f.admit(t, req)
	req.DryRun = ptr.To(true)
	dry := f.admit(t, req)
	if string(plain.Patch) != string(dry.Patch) || len(plain.Patch) == 0 {
		t.Errorf("dry-run patch differs:\n%s\n%s", plain.Patch, dry.Patch)
	}
}

func TestNoConfigYet(t *testing.T) {
	f := newFixture(t, nil, mutate.Options{})
	req, _ := create("sandboxes", podJSON(t, "basic"))
	resp := f.admit(t, req)
	if resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable || !strings.Contains(resp.Result.Message, "no policies are loaded") {
		t.Errorf("response = %+v", resp.Result)
	}
}

func TestPanicIsAnErroredResponse(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	f.handler.namespaces = func(context.Context, string) (mutate.Namespace, bool) {
		panic("the namespace cache exploded")
	}
	req, _ := create("sandboxes", podJSON(t, "basic"))
	resp := f.admit(t, req)
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError {
		t.Fatalf("response = %+v", resp.Result)
	}
	if !strings.Contains(resp.Result.Message, "the namespace cache exploded") {
		t.Errorf("message = %q", resp.Result.Message)
	}
	if resp.UID != req.UID {
		t.Errorf("uid = %q", resp.UID)
	}
	if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(OutcomeError))); got != 1 {
		t.Errorf("error count = %v", got)
	}
}

func TestShadowPoliciesOnlyCount(t *testing.T) {
	set := parseSet(t, `
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: trial
spec:
  enforcement: shadow
  match:
    podSelector:
      matchLabels:
        app: sandbox
  caches:
    - name: uv-cache
      mountPath: /root/.cache/uv
      sizeLimit: 1Gi
  env:
    - name: UV_LINK_MODE
      value: copy
`)
	f := newFixture(t, set, mutate.Options{})
	req, _ := create("sandboxes", podJSON(t, "basic"))
	resp := f.admit(t, req)
	if !resp.Allowed || len(resp.Patch) != 0 {
		t.Fatalf("a shadow policy patched: %s", resp.Patch)
	}
	if got := testutil.ToFloat64(f.handler.metrics.hits.WithLabelValues("trial", "memory", "shadow")); got != 1 {
		t.Errorf("shadow hits = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.handler.metrics.shadow.WithLabelValues("trial", "apply")); got != 2 {
		t.Errorf("shadow decisions = %v, want 2 (cache and env)", got)
	}
	if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(OutcomeUnchanged))); got != 1 {
		t.Errorf("unchanged = %v, want 1", got)
	}

	// A pod another mutator gave the cache and env as the policy would:
	// nothing to apply, both present.
	var pod corev1.Pod
	if err := json.Unmarshal(podJSON(t, "basic"), &pod); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "uv-cache", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Gi"))}}})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "uv-cache", MountPath: "/root/.cache/uv"})
		c.Env = append(c.Env, corev1.EnvVar{Name: "UV_LINK_MODE", Value: "copy"})
	}
	b, err := json.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = create("sandboxes", b)
	if resp := f.admit(t, req); !resp.Allowed || len(resp.Patch) != 0 {
		t.Fatalf("a shadow policy patched: %s", resp.Patch)
	}
	if got := testutil.ToFloat64(f.handler.metrics.shadow.WithLabelValues("trial", "apply")); got != 2 {
		t.Errorf("after a pod that has both: shadow apply decisions = %v, want still 2", got)
	}
	if got := testutil.ToFloat64(f.handler.metrics.shadow.WithLabelValues("trial", "present")); got != 2 {
		t.Errorf("shadow present decisions = %v, want 2 (cache and env)", got)
	}
}

func TestPolicyHitsByMode(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{LeakMitigation: mutate.LeakMitigationOn})
	req, raw := create("sandboxes", podJSON(t, "basic"))
	resp := f.admit(t, req)
	if got := testutil.ToFloat64(f.handler.metrics.hits.WithLabelValues("sandbox-seed", "disk", "enforce")); got != 1 {
		t.Errorf("hits{mode=disk} = %v, want 1", got)
	}
	pod := decodePod(t, applyPatch(t, raw, resp.AdmissionResponse))
	if v := volume(pod, "uv-cache"); v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != "" {
		t.Errorf("leak mitigation on: uv-cache = %+v, want a disk emptyDir", v)
	}
}

// TestSnapshotIsNeverMixed swaps the whole Config between two versions that
// differ in the policy set and in the options while admissions run, and
// checks that every answer is entirely one version.
func TestSnapshotIsNeverMixed(t *testing.T) {
	policyYAML := func(marker, size string) string {
		return fmt.Sprintf(`
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: seed
spec:
  mode: memory
  match:
    podSelector:
      matchLabels:
        app: sandbox
  caches:
    - name: uv-cache
      mountPath: /root/.cache/uv
      sizeLimit: %s
  env:
    - name: MARKER
      value: %s
`, size, marker)
	}
	a := &Config{Policies: parseSet(t, policyYAML("a", "1Gi")), Options: mutate.Options{LeakMitigation: mutate.LeakMitigationOff}}
	b := &Config{Policies: parseSet(t, policyYAML("b", "2Gi")), Options: mutate.Options{LeakMitigation: mutate.LeakMitigationOn}}
	f := newFixture(t, nil, mutate.Options{})
	f.config.Store(a)

	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				swapped <- n
				return
			default:
			}
			if n%2 == 0 {
				f.config.Store(b)
			} else {
				f.config.Store(a)
			}
			n++
		}
	}()
	const workers, perWorker = 8, 200
	seen := make(chan string, workers*perWorker)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range perWorker {
				req, raw := create("sandboxes", podJSON(t, "basic"))
				resp := f.admit(t, req)
				p, err := applyPatchErr(raw, resp.AdmissionResponse)
				if err != nil {
					errs <- err
					return
				}
				pod := &corev1.Pod{}
				if err := json.Unmarshal(p, pod); err != nil {
					errs <- err
					return
				}
				v := volume(pod, "uv-cache")
				if v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
					errs <- fmt.Errorf("no uv-cache emptyDir in %s", p)
					return
				}
				marker := env(pod.Spec.Containers[0], "MARKER")
				size, medium := v.EmptyDir.SizeLimit.String(), v.EmptyDir.Medium
				switch {
				case marker == "a" && size == "1Gi" && medium == corev1.StorageMediumMemory:
				case marker == "b" && size == "2Gi" && medium == "":
				default:
					errs <- fmt.Errorf("mixed answer: MARKER=%s sizeLimit=%s medium=%q", marker, size, medium)
					return
				}
				seen <- marker
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	if n := <-swapped; n < 2 {
		t.Errorf("only %d swaps happened", n)
	}
	close(seen)
	count := map[string]int{}
	for m := range seen {
		count[m]++
	}
	t.Logf("answers: %v", count)
}

func create(ns string, raw []byte) (cradmission.Request, []byte) {
	return op(admissionv1.Create, ns, raw)
}

func op(o admissionv1.Operation, ns string, raw []byte) (cradmission.Request, []byte) {
	return newRequest(o, ns, raw), raw
}

func volume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestLogsNeverHoldPodContents admits pods with secret-looking env values
// and annotations at debug level: the decision lines name the pod, the
// policies and the items, and nothing the pod carries.
func TestLogsNeverHoldPodContents(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	f.handler.log = log
	hook := f.handler.Webhook()
	const secret = "s3cr3t-value-0042"
	pod := strings.NewReplacer("hardlink", secret, `value: kept`, "value: "+secret).Replace(string(mustRead(t, "uv-link-mode-set")))
	pod = strings.Replace(pod, "labels:", "annotations:\n    token: "+secret+"\n  labels:", 1)
	for _, body := range [][]byte{
		reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, pod))),
		reviewBody(t, newRequest(admissionv1.Create, "brand-new", podJSON(t, pod))), // an error
		[]byte(strings.Replace(string(reviewBody(t, newRequest(admissionv1.Create, "sandboxes", podJSON(t, pod)))), `"AdmissionReview"`, `"Other"`, 1)),
	} {
		r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		hook.ServeHTTP(httptest.NewRecorder(), r)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, `"Admission decision"`) || !strings.Contains(all, `"sandboxes/uv-link-mode-set"`) ||
		!strings.Contains(all, "sandbox-seed/env/UV_LINK_MODE") {
		t.Errorf("no decision line with the pod and its items:\n%s", all)
	}
	if strings.Contains(all, secret) {
		t.Errorf("the log holds a value from the pod:\n%s", all)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "pods", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestStatusAlwaysOutcomes: with --status-always (the chart's guard) a pod
// no policy changes is answered with a patch that adds only the empty
// status annotation, and counted as what it is, unchanged or skipped, not
// mutated; a mutated pod is answered as without the flag.
func TestStatusAlwaysOutcomes(t *testing.T) {
	for _, tc := range []struct {
		pod     string
		outcome Outcome
		message string
	}{
		{pod: "basic", outcome: OutcomeMutated, message: "mutated by sandbox-seed"},
		{pod: "opted-out", outcome: OutcomeUnchanged, message: "no enforced policy matches the pod"},
		{pod: "windows", outcome: OutcomeSkipped, message: "Windows"},
	} {
		t.Run(tc.pod, func(t *testing.T) {
			f := newFixture(t, memoryPolicies(t), mutate.Options{StatusAlways: true})
			req, raw := create("sandboxes", podJSON(t, tc.pod))
			resp := f.admit(t, req)
			if !resp.Allowed || len(resp.Patch) == 0 || !strings.Contains(resp.Result.Message, tc.message) {
				t.Fatalf("allowed=%v message=%q patch %s; want allowed with a patch, %q", resp.Allowed, resp.Result.Message, resp.Patch, tc.message)
			}
			if got := testutil.ToFloat64(f.handler.metrics.requests.WithLabelValues(string(tc.outcome))); got != 1 {
				t.Errorf("sandbox_webhook_admission_requests_total{outcome=%q} = %v, want 1", tc.outcome, got)
			}
			pod := decodePod(t, applyPatch(t, raw, resp.AdmissionResponse))
			status := pod.Annotations[mutate.StatusAnnotation]
			if tc.outcome == OutcomeMutated {
				if status == "" || status == `{"policies":[]}` {
					t.Errorf("mutated pod's status %q", status)
				}
				return
			}
			if status != `{"policies":[]}` || len(pod.Annotations) != 1 {
				t.Errorf("annotations %v, want only the empty status", pod.Annotations)
			}
		})
	}
}
