package certs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// webhookConfig is a MutatingWebhookConfiguration like the chart's that selects
// nothing, so that the shared apiserver never calls it.
func webhookConfig(name, ns string, caBundle []byte, annotations map[string]string) *admissionregistrationv1.MutatingWebhookConfiguration {
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	path := "/mutate-v1-pod"
	hook := func(n string) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name: n,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "sandbox-webhook", Path: &path},
				CABundle: caBundle,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"certs-test": "never-set"}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{hook("pods.sandbox-webhook.io"), hook("pods-late.sandbox-webhook.io")},
	}
}

func setCertificateStatus(t *testing.T, cm cmclient.Interface, ns, name string, status cmapi.CertificateStatus) {
	t.Helper()
	crt, err := cm.CertmanagerV1().Certificates(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crt.Status = status
	if _, err := cm.CertmanagerV1().Certificates(ns).UpdateStatus(context.Background(), crt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCertManagerMode runs the watcher as a user holding only Options.RBAC()
// against a real apiserver and moves the Certificate and the webhook
// configuration through their states.
func TestCertManagerMode(t *testing.T) {
	admin := apiserver(t)
	ns := createNamespace(t, admin, "cm")
	mwcName := "certs-test-" + ns
	o := &Options{Mode: ModeCertManager, Namespace: ns, Certificate: "sandbox-webhook-serving", WebhookConfig: mwcName}
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	cfg := restrictedUser(t, admin, o)

	kube := kubernetes.NewForConfigOrDie(admin)
	cm := cmclient.NewForConfigOrDie(admin)
	ctx := context.Background()
	// The cainjector race: the configuration exists, its caBundle is still empty.
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		webhookConfig(mwcName, ns, nil, map[string]string{cmapi.WantInjectAnnotation: ns + "/" + o.Certificate}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwcName, metav1.DeleteOptions{})
	})
	// Objects of the same kinds that the watcher must ignore.
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhookConfig(mwcName+"-other", ns, nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwcName+"-other", metav1.DeleteOptions{})
	})

	logs := &logBuffer{}
	r, mgr, err := setup(logf.IntoContext(ctx, logs.logger()), o, cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.GetCertificate() != nil {
		t.Error("cert-manager mode must leave the serving certificate to --cert-dir")
	}
	check := r.ReadyChecks()["cert-manager-certificate"]
	if check == nil || len(r.ReadyChecks()) != 1 {
		t.Fatalf("ReadyChecks() = %v, want only cert-manager-certificate", r.ReadyChecks())
	}
	if err := check(nil); err == nil {
		t.Error("ready before the watcher started")
	}
	runManager(t, ctx, mgr, r)

	// No Certificate yet: not ready, and said loudly.
	logs.waitLogged(t, errorLine, "Certificate of the webhook does not exist", "certificates.mode=certManager")
	if err := check(nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("readiness without a Certificate: %v", err)
	}
	// The empty caBundle of the configuration, with the fix.
	line := logs.waitLogged(t, errorLine, "caBundle of the MutatingWebhookConfiguration is empty", "cert-manager-cainjector")
	if !strings.Contains(line, "pods.sandbox-webhook.io,pods-late.sandbox-webhook.io") || !strings.Contains(line, mwcName) {
		t.Errorf("the caBundle error names neither the configuration nor its webhooks: %s", line)
	}
	if _, found := logs.find(mwcName + "-other"); found {
		t.Errorf("the watcher looked at another configuration")
	}

	// A Certificate without status: still not ready.
	crt := &cmapi.Certificate{
		ObjectMeta: metav1.ObjectMeta{Name: o.Certificate, Namespace: ns},
		Spec: cmapi.CertificateSpec{
			SecretName: "sandbox-webhook-tls",
			DNSNames:   []string{"sandbox-webhook." + ns + ".svc"},
			IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: "Issuer"},
		},
	}
	if _, err := cm.CertmanagerV1().Certificates(ns).Create(ctx, crt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs.waitLogged(t, errorLine, "Certificate of the webhook is not Ready", "kubectl -n "+ns+" describe certificate "+o.Certificate)
	if err := check(nil); err == nil || !strings.Contains(err.Error(), "no Ready condition") {
		t.Errorf("readiness without a Ready condition: %v", err)
	}

	// Ready=True with a notAfter: ready, and the gauges follow.
	notAfter := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second)
	setCertificateStatus(t, cm, ns, o.Certificate, cmapi.CertificateStatus{
		NotAfter:   &metav1.Time{Time: notAfter},
		Conditions: []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready", Message: "Certificate is up to date and has not expired"}},
	})
	testkit.WaitFor(t, "readiness with Ready=True", waitLimit, func() error { return check(nil) })
	testkit.WaitFor(t, "the gauges", waitLimit, func() error {
		got, err := gauge(reg, metricNotAfter)
		if err != nil {
			return err
		}
		if got != float64(notAfter.Unix()) {
			return fmt.Errorf("%s = %v, want %d", metricNotAfter, got, notAfter.Unix())
		}
		if ready, err := gauge(reg, metricReady); err != nil || ready != 1 {
			return fmt.Errorf("%s = %v, want 1 (%w)", metricReady, ready, err)
		}
		return nil
	})
	logs.waitLogged(t, infoLine, "Certificate is Ready")

	// The cainjector fills the caBundle: logged as fixed.
	mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs.waitLogged(t, "caBundle of the MutatingWebhookConfiguration is injected")

	// Renewal failed: Ready=False turns readiness off and is logged with the reason.
	renewed := notAfter.Add(24 * time.Hour)
	setCertificateStatus(t, cm, ns, o.Certificate, cmapi.CertificateStatus{
		NotAfter:   &metav1.Time{Time: renewed},
		Conditions: []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionFalse, Reason: "Failed", Message: "issuer selfsigned not found"}},
	})
	testkit.WaitFor(t, "readiness with Ready=False", waitLimit, func() error {
		if err := check(nil); err == nil || !strings.Contains(err.Error(), "issuer selfsigned not found") {
			return fmt.Errorf("check = %w", err)
		}
		return nil
	})
	logs.waitLogged(t, errorLine, "is not Ready", `"reason":"Failed"`, "issuer selfsigned not found")
	testkit.WaitFor(t, "the gauges after Ready=False", waitLimit, func() error {
		if got, _ := gauge(reg, metricNotAfter); got != float64(renewed.Unix()) {
			return fmt.Errorf("%s = %v, want %d", metricNotAfter, got, renewed.Unix())
		}
		if ready, _ := gauge(reg, metricReady); ready != 0 {
			return fmt.Errorf("%s = %v, want 0", metricReady, ready)
		}
		return nil
	})

	// Deleted: not ready, the not-after gauge is cleared.
	if err := cm.CertmanagerV1().Certificates(ns).Delete(ctx, o.Certificate, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the gauge after deletion", waitLimit, func() error {
		if got, _ := gauge(reg, metricNotAfter); got != 0 {
			return fmt.Errorf("%s = %v, want 0", metricNotAfter, got)
		}
		return nil
	})
	if err := check(nil); err == nil {
		t.Error("ready without a Certificate")
	}
	if line, found := logs.find("not allowed to"); found {
		t.Errorf("Options.RBAC() is not enough: %s", line)
	}
	if line, found := globalLogs.find("forbidden"); found {
		t.Errorf("Options.RBAC() is not enough: %s", line)
	}
}

// TestCertManagerModeWrongAnnotation: when the configuration lacks the
// cainjector's annotation, the fix says how to add it.
func TestCertManagerModeWrongAnnotation(t *testing.T) {
	admin := apiserver(t)
	ns := createNamespace(t, admin, "cm-annot")
	mwcName := "certs-test-" + ns
	o := &Options{Mode: ModeCertManager, Namespace: ns, Certificate: "serving", WebhookConfig: mwcName, Registerer: prometheus.NewRegistry()}
	cfg := restrictedUser(t, admin, o)
	kube := kubernetes.NewForConfigOrDie(admin)
	ctx := context.Background()
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		webhookConfig(mwcName, ns, nil, map[string]string{cmapi.WantInjectAnnotation: ns + "/another"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwcName, metav1.DeleteOptions{})
	})
	logs := &logBuffer{}
	r, mgr, err := setup(logf.IntoContext(ctx, logs.logger()), o, cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, ctx, mgr, r)
	logs.waitLogged(t, errorLine, "caBundle of the MutatingWebhookConfiguration is empty",
		fmt.Sprintf("kubectl annotate mutatingwebhookconfiguration %s cert-manager.io/inject-ca-from=%s/serving --overwrite", mwcName, ns),
		`it is \"`+ns+`/another\" now`)

	// Deleting the configuration is logged: the webhook is not called any more.
	if err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, mwcName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	logs.waitLogged(t, errorLine, "MutatingWebhookConfiguration does not exist", "sandbox pods run unmutated")
}
