package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/kube"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// The chart's certificate modes (values: certificates.mode).
const (
	modeCertManager    = "certManager"
	modeSelfManaged    = "selfManaged"
	modeExistingSecret = "existingSecret"
)

// chartTimeoutSeconds is values.yaml's webhook.timeoutSeconds.
const chartTimeoutSeconds = 5

// TestChartInstall installs the chart with the Helm SDK in each certificate
// mode, each release into its own namespace, with the configuration calling
// the in-cluster Service: the apiserver accepts every object (Helm applies
// them server-side with strict field validation, cert-manager's Issuer and
// Certificate against the schemas of the CRDs from the cert-manager module),
// the stored MutatingWebhookConfiguration is the intended one, and the
// ServiceAccount holds what the mode's server needs (certs.Options.RBAC) and
// no more than that in the Secrets it does not own.
func TestChartInstall(t *testing.T) {
	installCertManagerCRDs(t)
	v, err := suite.cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != harness.KubeVersion {
		t.Fatalf("the control plane is %s; the chart is installed for %s", v.GitVersion, harness.KubeVersion)
	}

	t.Run(modeCertManager, func(t *testing.T) {
		r := installChart(t, "chart-certmanager", nil)
		r.checkObjects(t, modeCertManager)
		r.checkWebhookConfiguration(t, r.serviceClientConfig(nil))
		r.checkRBAC(t, modeCertManager)

		mwc := r.webhookConfiguration(t)
		if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], r.namespace+"/"+r.fullname; got != want {
			t.Errorf("annotation cert-manager.io/inject-ca-from = %q, want %q", got, want)
		}

		cm, err := cmclient.NewForConfig(suite.cp.Config)
		if err != nil {
			t.Fatal(err)
		}
		issuer, err := cm.CertmanagerV1().Issuers(r.namespace).Get(t.Context(), r.fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the chart's Issuer: %v", err)
		}
		if issuer.Spec.SelfSigned == nil {
			t.Errorf("Issuer %s is not selfSigned: %+v", issuer.Name, issuer.Spec)
		}
		crt, err := cm.CertmanagerV1().Certificates(r.namespace).Get(t.Context(), r.fullname, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the chart's Certificate: %v", err)
		}
		svc := r.fullname + "." + r.namespace + ".svc"
		s := crt.Spec
		var problems []string
		check := func(what string, ok bool, got any) {
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: got %v", what, got))
			}
		}
		check("secretName", s.SecretName == r.fullname+"-tls", s.SecretName)
		check("dnsNames", slices.Equal(s.DNSNames, []string{svc, svc + ".cluster.local"}), s.DNSNames)
		check("issuerRef", s.IssuerRef.Name == r.fullname && s.IssuerRef.Kind == "Issuer" && s.IssuerRef.Group == "cert-manager.io", s.IssuerRef)
		check("privateKey.rotationPolicy Always", s.PrivateKey != nil && s.PrivateKey.RotationPolicy == cmapi.RotationPolicyAlways, s.PrivateKey)
		check("duration 2160h", s.Duration != nil && s.Duration.Duration == 2160*time.Hour, s.Duration)
		check("renewBefore 720h", s.RenewBefore != nil && s.RenewBefore.Duration == 720*time.Hour, s.RenewBefore)
		if len(problems) > 0 {
			t.Errorf("the stored Certificate:\n  %s", strings.Join(problems, "\n  "))
		}

		// The schema is really enforced: the same Certificate with a
		// rotationPolicy outside the CRD's enum is refused.
		bad := crt.DeepCopy()
		bad.ObjectMeta = metav1.ObjectMeta{Name: crt.Name + "-invalid", Namespace: crt.Namespace}
		bad.Spec.PrivateKey.RotationPolicy = "Sometimes"
		_, err = cm.CertmanagerV1().Certificates(r.namespace).Create(t.Context(), bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "rotationPolicy") {
			t.Errorf("a Certificate with rotationPolicy Sometimes: got %v, want Invalid naming rotationPolicy", err)
		}
	})

	t.Run(modeSelfManaged, func(t *testing.T) {
		r := installChart(t, "chart-selfmanaged", map[string]any{"certificates": map[string]any{"mode": modeSelfManaged}})
		r.checkObjects(t, modeSelfManaged)
		r.checkWebhookConfiguration(t, r.serviceClientConfig(nil))
		r.checkRBAC(t, modeSelfManaged)
		if data := r.tlsSecret(t).Data; len(data) != 0 {
			t.Errorf("the chart's Secret %s-tls holds %d keys before any server ran, want none", r.fullname, len(data))
		}
	})

	t.Run(modeExistingSecret, func(t *testing.T) {
		gen := generateCerts(t, "sandbox-webhook.example.svc")
		r := installChart(t, "chart-existingsecret", map[string]any{
			"certificates": map[string]any{"mode": modeExistingSecret, "existingSecret": map[string]any{"secretName": "my-webhook-tls"}},
			"webhook":      map[string]any{"caBundle": base64.StdEncoding.EncodeToString(gen.ca)},
		})
		r.checkObjects(t, modeExistingSecret)
		r.checkWebhookConfiguration(t, r.serviceClientConfig(gen.ca))
		r.checkRBAC(t, modeExistingSecret)
	})
}

// TestChartExistingSecretURL: the chart installed by the Helm SDK with
// webhook.url pointing at a local server and webhook.caBundle from `certs
// generate` (existingSecret mode, the Secret created as docs/install.md says)
// is what sends sandbox pods to the server, which runs the chart's Deployment
// with the chart's ServiceAccount, and they are mutated by the chart's
// default policy; pods without the sandbox label are not.
func TestChartExistingSecretURL(t *testing.T) {
	const release = "chart-url"
	ns := release + "-system"
	gen := generateCerts(t, "127.0.0.1")
	ensureNamespace(t, ns, map[string]string{instanceLabel: release})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: release + "-tls", Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: gen.crt, corev1.TLSPrivateKeyKey: gen.key},
	}
	_, err := suite.cs.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // an earlier run's, with other certificates
		_, err = suite.cs.CoreV1().Secrets(ns).Update(t.Context(), secret, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	port := testkit.FreePort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d/mutate-v1-pod", port)

	r := installChart(t, release, map[string]any{
		"certificates": map[string]any{"mode": modeExistingSecret, "existingSecret": map[string]any{"secretName": secret.Name}},
		"webhook":      map[string]any{"url": url, "caBundle": base64.StdEncoding.EncodeToString(gen.ca)},
	})
	r.checkObjects(t, modeExistingSecret)
	r.checkWebhookConfiguration(t, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: gen.ca})

	d := r.runDeployment(t, port)
	podNS := release + "-pods"
	ensureNamespace(t, podNS, map[string]string{instanceLabel: release})
	if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(podNS, "probe", sleeping), true); err != nil {
		t.Fatal(err)
	}
	if p := chartSeedProblems(createPod(t, generated(testkit.SandboxPod(podNS, "sandbox", sleeping)))); len(p) > 0 {
		t.Errorf("sandbox pod:%s", joinProblems(p))
	}
	if p := untouchedProblems(createPod(t, generated(plainPod(podNS, "plain")))); len(p) > 0 {
		t.Errorf("pod without the sandbox label was changed:%s", joinProblems(p))
	}
	d.checkNoForbidden(t)

	// helm uninstall with the chart's defaults (webhook.guard on) under a
	// stream of sandbox pod creates: none is refused. Helm deletes the
	// webhook configuration first and the guard's policies after it; the
	// guard, whose parameter is the configuration, refuses nothing once it
	// is gone.
	s := createStream(t, podNS, func() { r.uninstall(t) })
	refused, total, first := s.tally(func(streamed) bool { return true })
	t.Logf("helm uninstall: %d of %d creates refused", refused, total)
	if refused > 0 {
		t.Errorf("helm uninstall refused %d of %d sandbox pod creates; the first: %v", refused, total, first)
	}
}

// TestChartSelfManaged: the chart in selfManaged mode with webhook.url at a
// local server and no caBundle, and the server run as the chart's Deployment
// (its arguments, its policies ConfigMap, a writable emptyDir for --cert-dir)
// as the chart's ServiceAccount, so a rule missing from the chart's RBAC fails
// the test. The server fills the chart's empty Secret and injects its CA into
// the stored configuration, and sandbox pods are mutated. A serving
// certificate close to expiry is renewed under the same CA without a single
// failed admission; a new CA (the Secret emptied) is adopted, after which pods
// are admitted again.
func TestChartSelfManaged(t *testing.T) {
	const release = "chart-selfmanaged-url"
	port := testkit.FreePort(t)
	// localhost, not 127.0.0.1: the rotator's certificate has DNS names only
	// (--cert-extra-dns-name=localhost).
	url := fmt.Sprintf("https://localhost:%d/mutate-v1-pod", port)
	r := installChart(t, release, map[string]any{
		"certificates": map[string]any{"mode": modeSelfManaged},
		"webhook":      map[string]any{"url": url},
	})
	r.checkObjects(t, modeSelfManaged)
	r.checkWebhookConfiguration(t, admissionregistrationv1.WebhookClientConfig{URL: &url})
	if data := r.tlsSecret(t).Data; len(data) != 0 {
		t.Fatalf("the chart's Secret holds %d keys before the server ran, want none", len(data))
	}

	d := r.runDeployment(t, port, "--cert-extra-dns-name=localhost")
	// Ready means the rotator injected its CA; the Secret is the source.
	first := r.waitSelfManaged(t, d, "the server's first certificate", nil)
	r.checkWebhookConfiguration(t, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: first.ca})

	podNS := release + "-pods"
	ensureNamespace(t, podNS, map[string]string{instanceLabel: release})
	if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(podNS, "probe", sleeping), true); err != nil {
		t.Fatal(err)
	}
	if p := chartSeedProblems(createPod(t, generated(testkit.SandboxPod(podNS, "sandbox", sleeping)))); len(p) > 0 {
		t.Errorf("sandbox pod:%s", joinProblems(p))
	}

	t.Run("serving certificate renewed under the same CA", func(t *testing.T) {
		// The serving certificate is replaced by one of the same CA that
		// expires within the rotator's renewal window (90 days); it stays valid
		// for localhost, so every admission must succeed throughout.
		short := r.tlsSecret(t)
		parsed, err := testkit.ParseCA(short.Data)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := parsed.Rotator()
		if err != nil {
			t.Fatal(err)
		}
		usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		signer := &rotator.CertRotator{DNSName: r.fullname + "." + r.namespace + ".svc", ExtraDNSNames: []string{"localhost"}, ExtKeyUsages: &usages}
		now := time.Now()
		crt, key, err := signer.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		short.Data[corev1.TLSCertKey], short.Data[corev1.TLSPrivateKeyKey] = crt, key

		loop := admitWhile(t, podNS)
		if _, err := suite.cs.CoreV1().Secrets(r.namespace).Update(t.Context(), short, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		renewed := r.waitSelfManaged(t, d, "the renewed serving certificate", func(s *selfManagedState) error {
			switch {
			case !bytes.Equal(s.ca, first.ca):
				return errors.New("the CA changed")
			case bytes.Equal(s.crt, crt), bytes.Equal(s.crt, first.crt):
				return errors.New("the serving certificate is not renewed yet")
			case s.served.NotAfter.Before(now.Add(300 * 24 * time.Hour)):
				return fmt.Errorf("the served certificate expires %s", s.served.NotAfter)
			}
			return nil
		})
		res := loop.stop()
		t.Logf("%d admissions while the serving certificate was renewed (new one expires %s)", res.total, renewed.served.NotAfter.Format(time.DateOnly))
		if res.total == 0 || len(res.failures) > 0 {
			t.Errorf("%d of %d admissions failed during the renewal (want none):%s", len(res.failures), res.total, joinProblems(res.failures))
		}
	})

	t.Run("new CA after the Secret is emptied", func(t *testing.T) {
		// The rotator generates a CA and serving certificate and writes the
		// CA into the caBundle; the server serves the new certificate once it
		// sees the Secret change. Between the two the apiserver can meet a
		// certificate its caBundle does not trust (the library's known limit,
		// see certs/selfmanaged.go), so failures in that window are reported,
		// not counted against the test; admissions must succeed once the
		// Secret, the caBundle and the served certificate agree.
		secret := r.tlsSecret(t)
		old := secret.Data[certs.CAFile]
		secret.Data = nil
		loop := admitWhile(t, podNS)
		if _, err := suite.cs.CoreV1().Secrets(r.namespace).Update(t.Context(), secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.waitSelfManaged(t, d, "the new CA", func(s *selfManagedState) error {
			if bytes.Equal(s.ca, old) {
				return errors.New("still the old CA")
			}
			return nil
		})
		if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(podNS, "probe", sleeping), true); err != nil {
			t.Fatal(err)
		}
		res := loop.stop()
		t.Logf("%d admissions during the CA rotation, %d failed in the window", res.total, len(res.failures))
		for _, f := range res.failures {
			t.Logf("  in the window: %s", f)
		}
		if p := chartSeedProblems(createPod(t, generated(testkit.SandboxPod(podNS, "after-new-ca", sleeping)))); len(p) > 0 {
			t.Errorf("sandbox pod after the new CA:%s", joinProblems(p))
		}
	})
	d.checkNoForbidden(t)
}

// chartRelease is one `helm install` of the chart from the working tree.
type chartRelease struct {
	name, namespace, fullname string
	rel                       *releasev1.Release
	// uninstall runs `helm uninstall` and checks that everything the
	// release installed is gone; once, whether the test calls it or its
	// cleanup does.
	uninstall func(t *testing.T)
}

// installChart installs the chart with the Helm SDK as `helm install release
// charts/sandbox-webhook --namespace release-system` would, values merged over
// values.yaml, without waiting: there is no kubelet, so the Deployment never
// becomes available. KubeVersion is harness.KubeVersion, as in the renders;
// against a cluster Helm uses the server's, which TestChartInstall checks is
// the same. The release namespace
// is created first. webhook.namespaceSelector requires the instance label
// release, so the configuration sends no other test's pods; the namespace
// carries that label too, so only the chart's exclusion keeps it out. The
// release is uninstalled when the test ends, and everything it installed must
// be gone then.
func installChart(t *testing.T, release string, values map[string]any) *chartRelease {
	t.Helper()
	r := &chartRelease{name: release, namespace: release + "-system", fullname: release + "-sandbox-webhook"}
	ensureNamespace(t, r.namespace, map[string]string{instanceLabel: release})

	vals := mergeMaps(map[string]any{"webhook": map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{instanceLabel: release}},
	}}, values)

	helmLog := &lockedBuffer{}
	cfg := helmConfig(t, r.namespace, helmLog)
	chrt, err := loader.Load(filepath.Join(suite.root, chart.Dir))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := common.ParseKubeVersion(harness.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = release
	install.Namespace = r.namespace
	install.KubeVersion = kv
	install.WaitStrategy = kube.HookOnlyStrategy // the chart has no hooks: nothing is waited for
	install.Timeout = time.Minute
	rel, err := install.RunWithContext(t.Context(), chrt, vals)
	if err != nil {
		t.Fatalf("helm install %s: %v\nHelm's log:\n%s", release, err, helmLog.String())
	}
	var ok bool
	if r.rel, ok = rel.(*releasev1.Release); !ok {
		t.Fatalf("helm install: unexpected release type %T", rel)
	}
	if r.rel.Info.Status != rcommon.StatusDeployed {
		t.Fatalf("release %s is %s, want deployed", release, r.rel.Info.Status)
	}
	var once sync.Once
	r.uninstall = func(t *testing.T) {
		once.Do(func() {
			objects := r.objects(t)
			u := action.NewUninstall(cfg)
			u.WaitStrategy = kube.HookOnlyStrategy
			u.Timeout = time.Minute
			if _, err := u.Run(release); err != nil {
				t.Errorf("helm uninstall %s: %v\nHelm's log:\n%s", release, err, helmLog.String())
				return
			}
			for _, o := range objects {
				if _, err := o.get(context.Background()); !apierrors.IsNotFound(err) {
					t.Errorf("%s is still there after helm uninstall: %v", o, err)
				}
			}
		})
	}
	t.Cleanup(func() { r.uninstall(t) })
	return r
}

// mergeMaps merges src into dst, maps recursively, as Helm merges values.
func mergeMaps(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// lockedBuffer collects the Helm SDK's log for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// helmConfig is the Helm SDK's configuration for the suite's admin user with
// releases stored as Secrets in ns, as the helm CLI does.
func helmConfig(t *testing.T, ns string, log *lockedBuffer) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(suite.kubeconfig)
	flags.Namespace = ptr.To(ns)
	flags.CacheDir = ptr.To(t.TempDir()) // not ~/.kube/cache
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(log, nil)))
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// chartObject is one object of the release's manifest.
type chartObject struct {
	kind, namespace, name string
	resource              dynamic.ResourceInterface
}

func (o chartObject) String() string {
	if o.namespace == "" {
		return o.kind + " " + o.name
	}
	return o.kind + " " + o.namespace + "/" + o.name
}

func (o chartObject) get(ctx context.Context) (*unstructured.Unstructured, error) {
	return o.resource.Get(ctx, o.name, metav1.GetOptions{})
}

// objects are the objects of the release's manifest, with clients for them.
func (r *chartRelease) objects(t *testing.T) []chartObject {
	t.Helper()
	docs, err := harness.DecodeObjects([]byte(r.rel.Manifest))
	if err != nil {
		t.Fatalf("the release's manifest: %v", err)
	}
	dyn, err := dynamic.NewForConfig(suite.cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(suite.cs.Discovery()))
	var out []chartObject
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(doc); err != nil {
			t.Fatalf("the release's manifest: %v", err)
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		o := chartObject{kind: gvk.Kind, name: u.GetName()}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			// Helm puts namespaced objects without one into the release's.
			o.namespace = u.GetNamespace()
			if o.namespace == "" {
				o.namespace = r.namespace
			}
			o.resource = dyn.Resource(m.Resource).Namespace(o.namespace)
		} else {
			o.resource = dyn.Resource(m.Resource)
		}
		out = append(out, o)
	}
	return out
}

// checkObjects checks that the release installed exactly the objects the mode
// renders, and that each is stored in the apiserver with the release's labels.
func (r *chartRelease) checkObjects(t *testing.T, mode string) {
	t.Helper()
	f, ns := r.fullname, r.namespace
	want := []string{
		"ClusterRole " + f,
		"ClusterRoleBinding " + f,
		"ConfigMap " + ns + "/" + f + "-config",
		"ConfigMap " + ns + "/" + f + "-policies",
		"Deployment " + ns + "/" + f,
		"MutatingWebhookConfiguration " + f,
		"NetworkPolicy " + ns + "/" + f,
		"PodDisruptionBudget " + ns + "/" + f,
		"Service " + ns + "/" + f,
		"ServiceAccount " + ns + "/" + f,
		"ValidatingAdmissionPolicy " + f + "-guard",
		"ValidatingAdmissionPolicyBinding " + f + "-guard",
		"MutatingAdmissionPolicy " + f + "-unmark",
		"MutatingAdmissionPolicyBinding " + f + "-unmark",
	}
	switch mode {
	case modeCertManager:
		want = append(want, "Role "+ns+"/"+f, "RoleBinding "+ns+"/"+f, "Issuer "+ns+"/"+f, "Certificate "+ns+"/"+f)
	case modeSelfManaged:
		want = append(want, "Role "+ns+"/"+f, "RoleBinding "+ns+"/"+f, "Secret "+ns+"/"+f+"-tls")
	}
	slices.Sort(want)

	var got []string
	for _, o := range r.objects(t) {
		got = append(got, o.String())
		stored, err := o.get(t.Context())
		if err != nil {
			t.Errorf("%s is not in the apiserver: %v", o, err)
			continue
		}
		if l := stored.GetLabels(); l["app.kubernetes.io/instance"] != r.name || l["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("stored %s has labels %v, want the release's", o, l)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects installed in mode %s (-want +got):\n%s", mode, diff)
	}
	t.Logf("helm install %s (%s): %d objects accepted:\n  %s", r.name, mode, len(got), strings.Join(got, "\n  "))
}

func (r *chartRelease) webhookConfiguration(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	mwc, err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), r.fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's MutatingWebhookConfiguration: %v", err)
	}
	return mwc
}

// serviceClientConfig is the clientConfig calling the chart's Service.
func (r *chartRelease) serviceClientConfig(caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{
			Namespace: r.namespace, Name: r.fullname, Path: ptr.To("/mutate-v1-pod"), Port: ptr.To[int32](443),
		},
		CABundle: caBundle,
	}
}

// checkWebhookConfiguration compares the stored configuration's webhooks
// with what the chart intends: pods at CREATE, no side effects, v1 reviews,
// reinvoked if needed, fail-closed, the short timeout, the release's test
// namespaces minus kube-system and the release namespace, app=sandbox pods;
// and, in the same namespaces whatever the pod's labels, ephemeral
// containers at UPDATE (kubectl debug) of pods with a hostPath volume.
func (r *chartRelease) checkWebhookConfiguration(t *testing.T, client admissionregistrationv1.WebhookClientConfig) {
	t.Helper()
	mwc := r.webhookConfiguration(t)
	// webhook.guard (the default): the pods entry twice, each failing open;
	// the retry only for a pod the first did not answer.
	pods := admissionregistrationv1.MutatingWebhook{
		Name:         "pods.sandbox-webhook.io",
		ClientConfig: client,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
		FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
		MatchPolicy:   ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{instanceLabel: r.name},
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", r.namespace},
			}},
		},
		ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](chartTimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
	}
	retry := *pods.DeepCopy()
	retry.Name = "pods-retry.sandbox-webhook.io"
	retry.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "sandbox-webhook-not-answered",
		Expression: "!(has(object.metadata.annotations) && 'sandbox-webhook.io/status' in object.metadata.annotations)",
	}}
	want := []admissionregistrationv1.MutatingWebhook{pods, retry, {
		Name:         "ephemeralcontainers.sandbox-webhook.io",
		ClientConfig: client,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/ephemeralcontainers"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
		FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:   ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{instanceLabel: r.name},
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", r.namespace},
			}},
		},
		// The apiserver defaults a missing objectSelector to the empty one.
		ObjectSelector:          &metav1.LabelSelector{},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](chartTimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name:       "has-hostpath-volume",
			Expression: "has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.hostPath))",
		}},
	}}
	if diff := cmp.Diff(want, mwc.Webhooks); diff != "" {
		t.Errorf("stored MutatingWebhookConfiguration %s (-want +got):\n%s", mwc.Name, diff)
	}
}

// checkRBAC asks the apiserver (SubjectAccessReviews) whether the chart's
// ServiceAccount may do what the mode's server does: what certs.Options.RBAC
// lists for the chart's flags, and list and watch namespaces for serve's
// namespace cache, and get of /metrics for the PodLevelResources and ImageVolume gates. It must not be able to read or change Secrets it does not
// own.
func (r *chartRelease) checkRBAC(t *testing.T, mode string) {
	t.Helper()
	o := &certs.Options{Mode: certs.ModeFiles, Namespace: r.namespace}
	switch mode {
	case modeCertManager:
		o.Mode, o.Certificate, o.WebhookConfig = certs.ModeCertManager, r.fullname, r.fullname
	case modeSelfManaged:
		o.Mode, o.Secret, o.WebhookConfig, o.ServiceName = certs.ModeSelfManaged, r.fullname+"-tls", r.fullname, r.fullname
	}
	role, clusterRole := o.RBAC()
	clusterRole = append(clusterRole, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}})
	allowed := func(ns, group, resource, verb, name string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serviceaccountUser(r.namespace, r.fullname),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + r.namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: group, Resource: resource, Verb: verb, Name: name,
			},
		}}
		got, err := suite.cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status.Allowed
	}
	checked := 0
	for _, rules := range []struct {
		ns    string
		rules []rbacv1.PolicyRule
	}{{r.namespace, role}, {"", clusterRole}} {
		for _, rule := range rules.rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						for _, name := range names {
							checked++
							if !allowed(rules.ns, group, res, verb, name) {
								t.Errorf("the ServiceAccount may not %s %s %q (group %q, namespace %q): the server needs it", verb, res, name, group, rules.ns)
							}
						}
					}
				}
			}
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  serviceaccountUser(r.namespace, r.fullname),
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + r.namespace, "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
	if got, err := suite.cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	} else if !got.Status.Allowed {
		t.Error("the ServiceAccount may not get the apiserver's /metrics: the server reads the PodLevelResources and ImageVolume gates there")
	}
	checked++
	for _, verb := range []string{"get", "update", "delete"} {
		if allowed(r.namespace, "", "secrets", verb, "someone-elses") {
			t.Errorf("the ServiceAccount may %s a Secret it does not own", verb)
		}
	}
	t.Logf("%s: checked %d permissions the server needs", mode, checked)
}

func serviceaccountUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

func (r *chartRelease) tlsSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := suite.cs.CoreV1().Secrets(r.namespace).Get(t.Context(), r.fullname+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deployment is the chart's Deployment run as a local process.
type deployment struct {
	webhook *harness.Webhook
	logPath string
}

// runDeployment runs the chart's Deployment, as the apiserver stored it, as a
// local `sandbox-webhook serve`, doing for its one container what a kubelet
// would: ConfigMap and Secret volumes are read from the apiserver and laid out
// as mounted volumes, emptyDirs are writable directories, mount paths in the
// arguments point at those, $POD_NAMESPACE becomes --namespace, and the
// process authenticates with a token of the Deployment's ServiceAccount, so it
// holds exactly the chart's RBAC. It listens on loopback ports, the webhook on
// port; --shutdown-delay is cut to 200ms and --idle-drain to 1s (nothing is
// admitted while it stops) and extra arguments are appended. It is stopped
// when the test ends, cleanly.
func (r *chartRelease) runDeployment(t *testing.T, port int, extra ...string) *deployment {
	t.Helper()
	ctx := t.Context()
	dep, err := suite.cs.AppsV1().Deployments(r.namespace).Get(ctx, r.fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := dep.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("the Deployment has %d containers and %d init containers; this runs one container", len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("the container runs command %q args %q, want the image's entrypoint with serve", c.Command, c.Args)
	}

	dir := t.TempDir()
	mounts := map[string]string{} // mount path → local directory
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || m.SubPath != "" {
			t.Fatalf("volume mount %+v: no such volume, or a subPath", m)
		}
		v, local := spec.Volumes[i], filepath.Join(dir, m.Name)
		var files map[string][]byte
		switch {
		case v.ConfigMap != nil && len(v.ConfigMap.Items) == 0:
			cm, err := suite.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("volume %s: %v", v.Name, err)
			}
			files = map[string][]byte{}
			for k, s := range cm.Data {
				files[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				files[k] = b
			}
		case v.Secret != nil && len(v.Secret.Items) == 0:
			s, err := suite.cs.CoreV1().Secrets(r.namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("volume %s: %v", v.Name, err)
			}
			files = map[string][]byte{}
			for k, b := range s.Data {
				files[k] = b
			}
		case v.EmptyDir != nil:
			if err := os.Mkdir(local, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("volume %s: only whole ConfigMaps, Secrets and emptyDirs are laid out here", v.Name)
		}
		if v.EmptyDir == nil {
			if _, err := harness.NewVolume(local, files); err != nil {
				t.Fatal(err)
			}
		}
		mounts[m.MountPath] = local
	}

	o := harness.WebhookOptions{Binary: suite.binary, Port: port}
	for _, a := range c.Args[1:] {
		name, value, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			t.Fatalf("container argument %q: want --flag=value", a)
		}
		for path, local := range mounts {
			if value == path || strings.HasPrefix(value, path+"/") {
				value = local + strings.TrimPrefix(value, path)
			}
		}
		switch name {
		case "--port", "--metrics-bind-address", "--health-probe-bind-address":
			// Loopback ports from the harness instead.
		case "--cert-dir":
			o.CertDir = value
		default:
			o.Args = append(o.Args, name+"="+value)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			o.Env = append(o.Env, e.Name+"="+e.Value) // GOMEMLIMIT
		case e.Name == "POD_NAMESPACE" && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			o.Args = append(o.Args, "--namespace="+r.namespace)
		default:
			t.Fatalf("container env %s: only literal values and POD_NAMESPACE from metadata.namespace are emulated", e.Name)
		}
	}
	o.Args = append(append(o.Args, "--shutdown-delay=200ms", "--idle-drain=1s"), extra...)
	o.Kubeconfig = serviceAccountKubeconfig(t, r.namespace, spec.ServiceAccountName, filepath.Join(dir, "kubeconfig"))

	d := &deployment{logPath: filepath.Join(dir, "webhook.log")}
	o.Log = createLog(t, d.logPath)
	if d.webhook, err = harness.StartWebhook(ctx, o); err != nil {
		t.Fatal(err) // the log is dumped by createLog's cleanup
	}
	t.Cleanup(func() {
		if err := d.webhook.Stop(); err != nil {
			t.Errorf("stopping the webhook: %v", err)
		}
	})
	return d
}

// serviceAccountKubeconfig writes a kubeconfig for the ServiceAccount ns/name
// with a token from the TokenRequest API, as a pod gets.
func serviceAccountKubeconfig(t *testing.T, ns, name, path string) string {
	t.Helper()
	tok, err := suite.cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: suite.cp.Config.Host, CertificateAuthorityData: suite.cp.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkNoForbidden fails the test when the apiserver refused the server
// anything: the chart's RBAC is short of what it does.
func (d *deployment) checkNoForbidden(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the server was refused something with the chart's RBAC: %s", line)
		}
	}
}

// selfManagedState is what the self-managed server keeps in agreement: the
// Secret's CA and serving certificate, the configuration's caBundle, and the
// certificate it serves.
type selfManagedState struct {
	ca, crt []byte
	served  *x509.Certificate
}

// waitSelfManaged waits until the chart's Secret holds a CA, a key and a
// serving certificate, the stored configuration's caBundle is that CA, and
// the server serves that certificate, valid for localhost under that CA; and
// until more holds when more is not nil.
func (r *chartRelease) waitSelfManaged(t *testing.T, d *deployment, what string, more func(*selfManagedState) error) *selfManagedState {
	t.Helper()
	var s *selfManagedState
	testkit.WaitFor(t, what, time.Minute, func() error {
		var err error
		s, err = r.selfManagedState(t, d)
		if err == nil && more != nil {
			err = more(s)
		}
		return err
	})
	return s
}

func (r *chartRelease) selfManagedState(t *testing.T, d *deployment) (*selfManagedState, error) {
	data := r.tlsSecret(t).Data
	s := &selfManagedState{ca: data[certs.CAFile], crt: data[certs.CertFile]}
	if len(s.ca) == 0 || len(s.crt) == 0 || len(data[certs.KeyFile]) == 0 || len(data["ca.key"]) == 0 {
		return nil, errors.New("the Secret is not filled")
	}
	if got := r.webhookConfiguration(t).Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, s.ca) {
		return nil, errors.New("the caBundle is not the Secret's CA")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.ca) {
		return nil, errors.New("the Secret's ca.crt holds no certificate")
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{
		RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12,
	}}
	conn, err := dialer.DialContext(t.Context(), "tcp", d.webhook.Address())
	if err != nil {
		return nil, fmt.Errorf("TLS to the server as the apiserver would with the caBundle: %w", err)
	}
	defer conn.Close()
	s.served = conn.(*tls.Conn).ConnectionState().PeerCertificates[0]
	if block, _ := pem.Decode(s.crt); block == nil || !bytes.Equal(block.Bytes, s.served.Raw) {
		return nil, errors.New("the server serves a certificate other than the Secret's")
	}
	return s, nil
}

// admissions are the results of admitWhile.
type admissions struct {
	total    int
	failures []string
}

type admitLoop struct {
	stopping chan struct{}
	done     chan admissions
	once     sync.Once
	res      admissions
}

// admitWhile creates sandbox pods in ns one after another (server-side dry
// runs: admitted and mutated, never stored) until stop, or the test's end; a
// failure is an error or a pod admitted unmutated.
func admitWhile(t *testing.T, ns string) *admitLoop {
	l := &admitLoop{stopping: make(chan struct{}), done: make(chan admissions, 1)}
	t.Cleanup(func() { l.stop() })
	go func() {
		var res admissions
		defer func() { l.done <- res }()
		for {
			pod := generated(testkit.SandboxPod(ns, "rotation", sleeping))
			got, err := suite.cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			res.total++
			switch {
			case err != nil:
				res.failures = append(res.failures, err.Error())
			case !harness.Mutated(got):
				res.failures = append(res.failures, "admitted unmutated")
			}
			select {
			case <-l.stopping:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return l
}

// stop ends the loop after its current admission and returns the results.
func (l *admitLoop) stop() admissions {
	l.once.Do(func() {
		close(l.stopping)
		l.res = <-l.done
	})
	return l.res
}

// generated gives pod a generated name with its name as the prefix, so that
// reruns in one process (-count) do not collide.
func generated(pod *corev1.Pod) *corev1.Pod {
	pod.GenerateName, pod.Name = pod.Name+"-", ""
	return pod
}

// chartSeedProblems is seedProblems for the chart's default policy, the
// example seed policy without its asset: a memory-backed uv cache,
// UV_LINK_MODE=copy and the pod-level headroom, and nothing at the asset path.
func chartSeedProblems(pod *corev1.Pod) []string {
	var p []string
	for _, s := range seedProblems(pod, corev1.StorageMediumMemory) {
		if !strings.Contains(s, "read-only mount at "+assetMountPath) {
			p = append(p, s)
		}
	}
	for _, c := range allContainers(pod) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == assetMountPath {
				p = append(p, fmt.Sprintf("container %s: mount at %s, which the chart's default policy does not inject", c.Name, assetMountPath))
			}
		}
	}
	return p
}

// generatedCerts is one `sandbox-webhook certs generate` output.
type generatedCerts struct{ ca, crt, key []byte }

func generateCerts(t *testing.T, host string) generatedCerts {
	t.Helper()
	dir := t.TempDir()
	if _, err := harness.Run(t.Context(), suite.binary, "certs", "generate", "--out-dir", dir, "--host", host); err != nil {
		t.Fatal(err)
	}
	var g generatedCerts
	for name, dst := range map[string]*[]byte{"ca.crt": &g.ca, "tls.crt": &g.crt, "tls.key": &g.key} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("certs generate: %v", err)
		}
		*dst = b
	}
	return g
}

// installCertManagerCRDs installs every CRD of deploy/crds/ in the
// cert-manager module this repository requires, from the module cache, and
// waits until the apiserver serves them.
func installCertManagerCRDs(t *testing.T) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-m", "-json", "github.com/cert-manager/cert-manager")
	cmd.Dir = suite.root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locating the cert-manager module: %v", err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Dir == "" {
		t.Fatalf("the cert-manager module %s is not in the module cache (go mod download)", mod.Version)
	}
	crds, err := envtest.InstallCRDs(suite.cp.Config, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(mod.Dir, "deploy", "crds")},
		ErrorIfPathMissing: true,
	})
	if err != nil {
		t.Fatalf("installing cert-manager %s's CRDs: %v", mod.Version, err)
	}
	names := make([]string, len(crds))
	for i, c := range crds {
		names[i] = c.Name
	}
	t.Logf("cert-manager %s CRDs: %s", mod.Version, strings.Join(names, ", "))
}
