package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// selfManagedFixture is a namespace with the chart's empty Secret and a
// MutatingWebhookConfiguration with an empty caBundle, and a user holding only
// Options.RBAC().
type selfManagedFixture struct {
	ns, secret, mwc string
	admin           kubernetes.Interface
	user            *rest.Config
}

func newSelfManagedFixture(t *testing.T) *selfManagedFixture {
	t.Helper()
	cfg := apiserver(t)
	f := &selfManagedFixture{ns: createNamespace(t, cfg, "sm"), secret: "sandbox-webhook-tls", admin: kubernetes.NewForConfigOrDie(cfg)}
	f.mwc = "certs-test-" + f.ns
	ctx := context.Background()
	if _, err := f.admin.CoreV1().Secrets(f.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: f.secret}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another Secret in the namespace, which must stay untouched.
	if _, err := f.admin.CoreV1().Secrets(f.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhookConfig(f.mwc, f.ns, nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), f.mwc, metav1.DeleteOptions{})
	})
	f.user = restrictedUser(t, cfg, f.options(""))
	return f
}

func (f *selfManagedFixture) options(instance string) *Options {
	return &Options{
		Mode: ModeSelfManaged, Namespace: f.ns, Secret: f.secret, WebhookConfig: f.mwc, ServiceName: "sandbox-webhook",
		ExtraDNSNames:  []string{"localhost"},
		controllerName: "cert-rotator-" + f.ns + "-" + instance,
	}
}

// instance is one running self-managed server.
type instance struct {
	runner  *Runner
	certDir string
	logs    *logBuffer
	stop    func() error
}

func (f *selfManagedFixture) start(t *testing.T, name string) *instance {
	t.Helper()
	in := &instance{certDir: filepath.Join(t.TempDir(), "certs"), logs: &logBuffer{}} // created by Setup
	var err error
	var mgr manager.Manager
	in.runner, mgr, err = setup(logf.IntoContext(context.Background(), in.logs.logger().WithName(name)), f.options(name), f.user, in.certDir)
	if err != nil {
		t.Fatal(err)
	}
	in.stop = runManager(t, context.Background(), mgr, in.runner)
	return in
}

func (in *instance) ready() error {
	for name, check := range in.runner.ReadyChecks() {
		if err := check(nil); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (f *selfManagedFixture) secretData(t *testing.T) map[string][]byte {
	t.Helper()
	s, err := f.admin.CoreV1().Secrets(f.ns).Get(context.Background(), f.secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

func (f *selfManagedFixture) caBundles(t *testing.T) [][]byte {
	t.Helper()
	mwc, err := f.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), f.mwc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, wh := range mwc.Webhooks {
		out = append(out, wh.ClientConfig.CABundle)
	}
	return out
}

// converged checks that the instances serve the certificate in the Secret, that
// it verifies against the CA in the Secret for the Service's names, that every
// caBundle is that CA, and that each cert dir holds the same files.
func (f *selfManagedFixture) converged(t *testing.T, ins ...*instance) error {
	data := f.secretData(t)
	ca, crt := data[CAFile], data[CertFile]
	if len(ca) == 0 || len(crt) == 0 || len(data[KeyFile]) == 0 || len(data["ca.key"]) == 0 {
		return errors.New("the Secret is not populated")
	}
	for i, b := range f.caBundles(t) {
		if !pemEqual(b, ca) {
			return fmt.Errorf("webhook %d: caBundle is not the Secret's CA", i)
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return errors.New("the Secret's ca.crt holds no certificate")
	}
	for _, in := range ins {
		if err := in.ready(); err != nil {
			return err
		}
		served, err := in.runner.GetCertificate()(&tls.ClientHelloInfo{})
		if err != nil {
			return err
		}
		block, _ := pem.Decode(crt)
		if block == nil || !bytesEqual(served.Certificate[0], block.Bytes) {
			return errors.New("an instance serves a certificate other than the Secret's")
		}
		for _, name := range []string{"sandbox-webhook." + f.ns + ".svc", "sandbox-webhook." + f.ns + ".svc.cluster.local", "localhost"} {
			if _, err := served.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return fmt.Errorf("served certificate for %s: %w", name, err)
			}
		}
		for name, want := range map[string][]byte{CAFile: ca, CertFile: crt, KeyFile: data[KeyFile]} {
			got, err := os.ReadFile(filepath.Join(in.certDir, name))
			if err != nil {
				return err
			}
			if !bytesEqual(got, want) {
				return fmt.Errorf("%s in the cert dir differs from the Secret", name)
			}
		}
	}
	return nil
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func (f *selfManagedFixture) waitConverged(t *testing.T, what string, ins ...*instance) {
	t.Helper()
	testkit.WaitFor(t, what, waitLimit, func() error { return f.converged(t, ins...) })
}

func noRBACErrors(t *testing.T, ins ...*instance) {
	t.Helper()
	for _, in := range append(ins, &instance{logs: globalLogs}) {
		if line, found := in.logs.find("forbidden"); found {
			t.Errorf("Options.RBAC() is not enough: %s", line)
		}
	}
}

// TestSelfManagedMode: the server fills the empty Secret, injects the CA into
// the configuration, re-injects it when wiped, and renews a serving certificate
// that is close to expiry while keeping the CA.
func TestSelfManagedMode(t *testing.T) {
	f := newSelfManagedFixture(t)
	ctx := context.Background()
	a := f.start(t, "a")
	f.waitConverged(t, "the first certificate", a)

	data := f.secretData(t)
	unrelated, err := f.admin.CoreV1().Secrets(f.ns).Get(ctx, "unrelated", metav1.GetOptions{})
	if err != nil || string(unrelated.Data["k"]) != "v" || len(unrelated.Data) != 1 {
		t.Errorf("the unrelated Secret changed: %v %v", unrelated.Data, err)
	}
	if fi, err := os.Stat(filepath.Join(a.certDir, KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key in the cert dir: %v, %v; want mode 0600", fi.Mode(), err)
	}

	// Someone wipes the caBundle (a `kubectl apply` of the chart's manifest).
	mwc, err := f.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, f.mwc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = nil
	}
	if _, err := f.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitConverged(t, "the caBundle re-injected", a)
	if !pemEqual(f.secretData(t)[CAFile], data[CAFile]) {
		t.Error("re-injecting the caBundle changed the CA")
	}

	// A serving certificate inside the renewal window (90 days before expiry) is
	// renewed with the same CA, and served without a restart.
	parsed, err := testkit.ParseCA(data)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := parsed.Rotator()
	if err != nil {
		t.Fatal(err)
	}
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	signer := &rotator.CertRotator{DNSName: "sandbox-webhook." + f.ns + ".svc", ExtKeyUsages: &usages}
	now := time.Now()
	shortCrt, shortKey, err := signer.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := f.admin.CoreV1().Secrets(f.ns).Get(ctx, f.secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data[CertFile], secret.Data[KeyFile] = shortCrt, shortKey
	if _, err := f.admin.CoreV1().Secrets(f.ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the renewed serving certificate", waitLimit, func() error {
		if err := f.converged(t, a); err != nil {
			return err
		}
		served, _ := a.runner.GetCertificate()(&tls.ClientHelloInfo{})
		if served.Leaf.NotAfter.Before(now.Add(300 * 24 * time.Hour)) {
			return fmt.Errorf("served certificate expires %s, not renewed yet", served.Leaf.NotAfter)
		}
		return nil
	})
	if !pemEqual(f.secretData(t)[CAFile], data[CAFile]) {
		t.Error("renewing the serving certificate replaced the CA")
	}
	noRBACErrors(t, a)
}

// TestSelfManagedModeReplicas: two servers started together against the same
// empty Secret converge on one CA and one serving certificate; when the Secret
// is emptied (a forced rotation) they converge on a new CA.
func TestSelfManagedModeReplicas(t *testing.T) {
	f := newSelfManagedFixture(t)
	a, b := f.start(t, "a"), f.start(t, "b")
	f.waitConverged(t, "two replicas on one CA", a, b)
	oldCA := f.secretData(t)[CAFile]

	ctx := context.Background()
	secret, err := f.admin.CoreV1().Secrets(f.ns).Get(ctx, f.secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = nil
	if _, err := f.admin.CoreV1().Secrets(f.ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a new CA after the Secret was emptied", waitLimit, func() error {
		if err := f.converged(t, a, b); err != nil {
			return err
		}
		if pemEqual(f.secretData(t)[CAFile], oldCA) {
			return errors.New("still the old CA")
		}
		return nil
	})
	noRBACErrors(t, a, b)
}

// TestSelfManagedModeErrors: a missing Secret stops the manager with an error that
// names it; a cert dir that cannot be written is refused by Setup.
func TestSelfManagedModeErrors(t *testing.T) {
	f := newSelfManagedFixture(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := setup(context.Background(), f.options("file"), f.user, filepath.Join(file, "certs")); err == nil || !strings.Contains(err.Error(), "--cert-dir") {
		t.Errorf("Setup with a cert dir under a file: %v", err)
	}

	o := f.options("missing")
	o.Secret = "does-not-exist"
	r, mgr, err := setup(context.Background(), o, f.user, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = r.Explain(mgr.Start(context.Background()))
	if err == nil || !strings.Contains(err.Error(), "Secret "+f.ns+"/does-not-exist must exist") {
		t.Errorf("Start without the Secret: %v", err)
	}
}
