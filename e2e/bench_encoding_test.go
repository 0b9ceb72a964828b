//go:build e2ebench

package e2e

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/sandbox-webhook/sandbox-webhook/internal/benchdata"
)

// TestAPIServerSendsTypedEncoding checks what the webhook's admission path
// is built on (admission.Handler.Review, mutate.Patch): the pod in an AdmissionReview
// from kube-apiserver is byte for byte the typed encoding of the decoded pod,
// so the patch is built from the regions the core changed and no document is
// diffed whole. A recording webhook receives the creates of the benchmark pods
// and of the e2e sandbox pod. Should a newer kube-apiserver encode pods
// differently, the webhook stays correct (it takes the whole-document diff)
// but slower, and this test says where the bytes differ.
func TestAPIServerSendsTypedEncoding(t *testing.T) {
	const ns = "benchencoding"
	ensureNamespace(t, ns, map[string]string{instanceLabel: ns})
	ctx := t.Context()

	var mu sync.Mutex
	var raws [][]byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
			return
		}
		mu.Lock()
		raws = append(raws, review.Request.Object.Raw)
		mu.Unlock()
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := srv.URL + "/record"
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "record.benchencoding.e2e.sandbox-webhook.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{instanceLabel: ns}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(t.Context(), mwc.Name, metav1.DeleteOptions{})
	})

	pods := []*corev1.Pod{sandboxPod(ns, "small")}
	for _, p := range []*corev1.Pod{benchdata.TypicalPod(), benchdata.LargePod()} {
		p.Namespace = ns
		// No PriorityClass of that name here, and managedFields are the
		// API server's to write.
		p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.PreemptionPolicy = "", nil, nil
		p.ManagedFields = nil
		pods = append(pods, p)
	}
	waitFor(t, "the API server to call the recording webhook", func() (bool, string) {
		mu.Lock()
		n := len(raws)
		mu.Unlock()
		if n > 0 {
			return true, ""
		}
		_, err := suite.cs.CoreV1().Pods(ns).Create(ctx, sandboxPod(ns, fmt.Sprintf("probe-%d", n)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return false, fmt.Sprint(err)
	})
	mu.Lock()
	raws = nil
	mu.Unlock()
	for _, p := range pods {
		if _, err := suite.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", p.Name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(raws) != len(pods) {
		t.Fatalf("the webhook saw %d creates, want %d", len(raws), len(pods))
	}
	for _, raw := range raws {
		var pod corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
			t.Fatal(err)
		}
		typed, err := json.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(typed, raw) {
			at := 0
			for at < len(raw) && at < len(typed) && raw[at] == typed[at] {
				at++
			}
			lo := max(at-80, 0)
			t.Errorf("pod %s: the API server's encoding differs from the typed encoding at byte %d:\n  sent:  …%s\n  typed: …%s",
				pod.Name, at, raw[lo:min(at+80, len(raw))], typed[lo:min(at+80, len(typed))])
			continue
		}
		t.Logf("pod %s: %d bytes, the typed encoding", pod.Name, len(raw))
	}
}
