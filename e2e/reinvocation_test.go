package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// lateContainer is what the second webhook adds.
const lateContainer = "late-sidecar"

// sidecarInjector is a tiny mutating webhook that adds a container to pods
// that lack it, the way a service mesh or logging injector would. It records
// whether ours had already run on each pod it saw.
type sidecarInjector struct {
	mu sync.Mutex
	// sawMutated[i] is whether the i-th pod it was sent carried our
	// status annotation.
	sawMutated []bool
	// mounts are the late container's volume mounts.
	mounts []corev1.VolumeMount
}

func (s *sidecarInjector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
		return
	}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
		http.Error(w, "bad pod", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.sawMutated = append(s.sawMutated, harness.Mutated(&pod))
	s.mu.Unlock()

	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	has := false
	for _, c := range pod.Spec.Containers {
		has = has || c.Name == lateContainer
	}
	if !has {
		patch, _ := json.Marshal([]map[string]any{{
			"op":   "add",
			"path": "/spec/containers/-",
			"value": corev1.Container{
				Name:         lateContainer,
				Image:        "busybox:1.37",
				Command:      []string{"sleep", "infinity"},
				VolumeMounts: s.mounts,
			},
		}})
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	review.Response = resp
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

// Case 4: a second webhook, called after ours, adds a container. With
// reinvocationPolicy IfNeeded (the chart's) the apiserver calls ours again,
// and the stored pod has the cache mount, the env and the asset in the new
// container too, with nothing duplicated anywhere.
func TestReinvocation(t *testing.T) {
	in := newInstance(t, "reinvocation", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "reinvocation"}}},
	})
	if got := in.mwc.Webhooks[0].ReinvocationPolicy; got == nil || *got != admissionregistrationv1.IfNeededReinvocationPolicy {
		t.Fatalf("the chart's webhook has reinvocationPolicy %v, want IfNeeded", got)
	}

	injector := &sidecarInjector{}
	startInjector(t, in, injector)
	injector.mu.Lock()
	injector.sawMutated = nil
	injector.mu.Unlock()

	pod := testkit.SandboxPod("reinvocation", "sandbox", sleeping)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.37", Command: []string{"true"}}}
	got := createPod(t, pod)

	if names := containerNames(got); names != "init,main,"+lateContainer {
		t.Fatalf("stored containers %s, want init,main,%s", names, lateContainer)
	}
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("stored pod %s:%s", fmtPod(got), joinProblems(p))
	}
	injector.mu.Lock()
	saw := injector.sawMutated
	injector.mu.Unlock()
	if len(saw) == 0 || !saw[0] {
		t.Errorf("the second webhook saw %v (our status annotation present?); ours must run first for this to test reinvocation", saw)
	}
}

// TestReinvocationWritableAsset: a second webhook, called after ours, adds
// a container that mounts the policy's host-path asset volume writable.
// On reinvocation ours sees the volume it injected mounted other than the
// policy says: the pod would run with the host path writable in that
// container, so the apiserver refuses the pod with our reason, and stores
// nothing.
func TestReinvocationWritableAsset(t *testing.T) {
	const ns = "reinvocation-writable"
	in := newInstance(t, ns, instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	startInjector(t, in, &sidecarInjector{mounts: []corev1.VolumeMount{{Name: assetVolume, MountPath: "/data"}}})

	_, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), testkit.SandboxPod(ns, "sandbox", sleeping), metav1.CreateOptions{})
	if err == nil {
		t.Fatalf("the apiserver created a pod whose container %s mounts host path volume %s writable", lateContainer, assetVolume)
	}
	msg := err.Error()
	if !apierrors.IsForbidden(err) || !strings.Contains(msg, "denied the request") ||
		!strings.Contains(msg, `container "`+lateContainer+`" mounts hostPath volume "`+assetVolume+`"`) {
		t.Errorf("refused with %v, want the webhook's denial naming the container and the volume", err)
	}
	if _, err := suite.cs.CoreV1().Pods(ns).Get(t.Context(), "sandbox", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused pod is stored (%v)", err)
	}
}

// startInjector serves injector and installs it as a second webhook,
// called after in's for the same pods, and waits until the apiserver calls
// it.
func startInjector(t *testing.T, in *instance, injector *sidecarInjector) {
	t.Helper()
	// The injector's own certificate, from the same generator.
	certs, err := harness.NewCerts(t.Context(), suite.binary, filepath.Join(t.TempDir(), "tls"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(certs.Dir(), "tls.crt"), filepath.Join(certs.Dir(), "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(injector)
	srv.Listener.Close()
	if srv.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	// Configurations are called in name order: "zz-…" comes after ours.
	url := srv.URL + "/inject"
	fail := admissionregistrationv1.Fail
	never := admissionregistrationv1.NeverReinvocationPolicy
	none := admissionregistrationv1.SideEffectClassNone
	second := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "zz-e2e-late-sidecar-" + in.name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "late-sidecar.e2e.sandbox-webhook.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: certs.Current().CA},
			Rules:                   in.mwc.Webhooks[0].Rules,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{instanceLabel: in.name}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			ReinvocationPolicy:      &never,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if second.Name <= in.mwc.Name {
		t.Fatalf("%s must sort after %s to be called after it", second.Name, in.mwc.Name)
	}
	in.install(t, second)
	t.Cleanup(func() {
		_ = suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), second.Name, metav1.DeleteOptions{})
	})
	// Wait until the apiserver calls the injector too (the probe may be
	// refused for what the injector adds).
	testkit.WaitFor(t, "the apiserver to call the second webhook", time.Minute, func() error {
		_, err := suite.cs.CoreV1().Pods(in.probeNamespace).Create(t.Context(), testkit.SandboxPod(in.probeNamespace, "probe", sleeping), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		injector.mu.Lock()
		defer injector.mu.Unlock()
		if len(injector.sawMutated) == 0 {
			return fmt.Errorf("not called; the probe: %w", err)
		}
		return nil
	})
}

func containerNames(pod *corev1.Pod) string {
	var s string
	for _, c := range allContainers(pod) {
		if s != "" {
			s += ","
		}
		s += c.Name
	}
	return s
}

// TestReinvocationPlacement: under the placement example, a container a
// second webhook adds after ours gets its image mirrored and the tool
// directory on its PATH when the API server calls ours again, and nothing
// of the first pass is added twice: one PATH entry per container, one copy
// of the policy's toleration, the image rewritten once.
func TestReinvocationPlacement(t *testing.T) {
	const ns = "reinvocation-placement"
	policies, err := harness.ReadDir(filepath.Join(suite.root, "examples/policies/placement"))
	if err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, ns, instanceOptions{
		policies:   policies,
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	startInjector(t, in, &sidecarInjector{})

	got := createPod(t, testkit.SandboxPod(ns, "sandbox", sleeping))
	if names := containerNames(got); names != "main,"+lateContainer {
		t.Fatalf("stored containers %s, want main,%s", names, lateContainer)
	}
	want := map[string]string{
		"main":        "mirror.example.com/dockerhub-library/python:3.12-slim",
		lateContainer: "mirror.example.com/dockerhub-library/busybox:1.37",
	}
	const path = "/opt/tools/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, c := range got.Spec.Containers {
		if c.Image != want[c.Name] {
			t.Errorf("container %s: image %s, want %s", c.Name, c.Image, want[c.Name])
		}
		var paths []string
		for _, e := range c.Env {
			if e.Name == "PATH" {
				paths = append(paths, e.Value)
			}
		}
		if len(paths) != 1 || paths[0] != path {
			t.Errorf("container %s: PATH %q, want once %q", c.Name, paths, path)
		}
	}
	n := 0
	for _, tol := range got.Spec.Tolerations {
		if tol.Key == "sandbox.gke.io/runtime" {
			n++
		}
	}
	if n != 1 || got.Spec.RuntimeClassName == nil || *got.Spec.RuntimeClassName != "gvisor" {
		t.Errorf("runtime class %v and %d copies of the policy's toleration, want gvisor and 1", got.Spec.RuntimeClassName, n)
	}
}
