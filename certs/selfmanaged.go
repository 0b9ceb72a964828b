package certs

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// newSelfManaged is the thin glue around open-policy-agent/cert-controller's rotator,
// which does the real work: it keeps a CA (10 years) and a serving certificate
// (1 year, renewed 90 days before expiry, checked every 12 hours and on every
// change of the Secret) in the Secret --cert-secret, and writes the CA into every
// webhook's caBundle of --webhook-config, again whenever someone changes or wipes
// it. The Secret is the single source of truth: every replica runs the rotator
// (no leader election), each write is an update carrying the resourceVersion the
// replica read, so when replicas race the apiserver accepts one and the others
// get a conflict, re-read and adopt the winner's CA.
//
// What the glue adds: the rotator assumes the Secret is mounted at --cert-dir by
// the kubelet, which takes up to a minute after each change and does not exist
// when the webhook runs outside a cluster. secretCert watches the one Secret
// (a field-selected informer), serves its key pair from memory as soon as it
// changes (serve's GetCertificate), and writes ca.crt, tls.key and tls.crt to
// --cert-dir, where the rotator waits for them; --cert-dir must therefore be
// writable (an emptyDir in the chart).
//
// Known limit, from the library: when the CA itself is replaced (an empty or
// corrupted Secret, or ten years on) the caBundle holds only the new CA, so for
// the moment between the caBundle update and a replica seeing the new Secret that
// replica's certificate is not trusted. Renewing the serving certificate alone,
// the yearly case, keeps the CA and has no such window.
//
// RBAC: see Options.RBAC and the package documentation (why list and watch
// cannot be narrowed by name, why the Secret must exist).
//
// It adds the rotator and secretCert, with a cache holding only the one
// Secret, to mgr.
func newSelfManaged(log logr.Logger, o *Options, mgr manager.Manager, certDir string) (*Runner, error) {
	if err := checkWritableDir(certDir); err != nil {
		return nil, fmt.Errorf("--cert-mode=self-managed writes the serving certificate to --cert-dir: %w", err)
	}
	secretKey := types.NamespacedName{Namespace: o.Namespace, Name: o.Secret}
	// secretCert's own cache holds the one Secret.
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{o.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", o.Secret),
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("self-managed certificates: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, fmt.Errorf("self-managed certificates: %w", err)
	}
	svc := o.ServiceName + "." + o.Namespace
	cr := &rotator.CertRotator{
		SecretKey:      secretKey,
		CertDir:        certDir,
		CAName:         "sandbox-webhook-ca",
		CAOrganization: "sandbox-webhook",
		DNSName:        svc + ".svc",
		ExtraDNSNames:  append([]string{o.ServiceName, svc, svc + ".svc.cluster.local"}, o.ExtraDNSNames...),
		IsReady:        make(chan struct{}),
		Webhooks:       []rotator.WebhookInfo{{Name: o.WebhookConfig, Type: rotator.Mutating}},
		FieldOwner:     "sandbox-webhook",
		ControllerName: cmp.Or(o.controllerName, "sandbox-webhook-cert-rotator"),
		// Every replica rotates; optimistic concurrency on the Secret decides.
		RequireLeaderElection: false,
	}
	if err := rotator.AddRotator(mgr, cr); err != nil {
		return nil, fmt.Errorf("self-managed certificates: %w", err)
	}
	cert := &secretCert{log: log, dir: certDir, key: secretKey, written: map[string][]byte{}}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return cert.run(ctx, secrets) })); err != nil {
		return nil, fmt.Errorf("self-managed certificates: %w", err)
	}
	return &Runner{
		checks: map[string]healthz.Checker{
			// IsReady is closed by the rotator once the certificate is in --cert-dir
			// and the CA in the webhook configuration's caBundle.
			"cert-rotator": func(*http.Request) error {
				select {
				case <-cr.IsReady:
					return nil
				default:
					return errors.New("the CA is not yet injected into the webhook configuration")
				}
			},
			// Fails while the Secret holds a certificate that cannot be used.
			"cert-secret": cert.check,
		},
		getCert: cert.getCertificate,
		// Names the Secret when the manager stopped because it is missing.
		explain: func(err error) error {
			if err == nil || !apierrors.IsNotFound(err) {
				return err
			}
			return fmt.Errorf("self-managed certificates: Secret %s must exist, empty or not (the chart renders it; by hand: kubectl -n %s create secret generic %s): %w",
				secretKey, secretKey.Namespace, secretKey.Name, err)
		},
	}, nil
}

// secretCert follows the one Secret: it serves its key pair from memory (serve's
// GetCertificate, so a rotation takes effect at the next handshake) and mirrors it
// into the cert dir, where the rotator looks for it.
type secretCert struct {
	log logr.Logger
	dir string
	key types.NamespacedName

	current atomic.Pointer[tls.Certificate]

	mu      sync.Mutex
	written map[string][]byte // what was last written, by file name
	lastErr error
}

func (f *secretCert) run(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("watching Secret %s: %w", f.key, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.sync(obj) },
		UpdateFunc: func(_, obj any) { f.sync(obj) },
	})
	if err != nil {
		return fmt.Errorf("watching Secret %s: %w", f.key, err)
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

func (f *secretCert) sync(obj any) {
	secret, ok := obj.(*corev1.Secret)
	if !ok || secret.Namespace != f.key.Namespace || secret.Name != f.key.Name {
		return
	}
	err := f.update(secret.Data)
	f.mu.Lock()
	f.lastErr = err
	f.mu.Unlock()
	if err != nil {
		f.log.Error(err, "cannot use the serving certificate in the Secret", "secret", f.key.String(), "certDir", f.dir)
	}
}

func (f *secretCert) update(data map[string][]byte) error {
	crt, key, ca := data[CertFile], data[KeyFile], data[CAFile]
	if len(crt) == 0 || len(key) == 0 || len(ca) == 0 {
		return nil // not populated yet; the rotator fills it
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return fmt.Errorf("the Secret holds no valid key pair: %w", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	// The key before the certificate, so that a reader reloading on tls.crt
	// finds the matching key.
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{{CAFile, ca, 0o644}, {KeyFile, key, 0o600}, {CertFile, crt, 0o644}}
	changed := false
	for _, file := range files {
		if bytes.Equal(f.written[file.name], file.data) {
			continue
		}
		if err := writeFileAtomic(filepath.Join(f.dir, file.name), file.data, file.mode); err != nil {
			return err
		}
		f.written[file.name] = file.data
		changed = true
	}
	if prev := f.current.Swap(&pair); prev == nil || changed {
		f.log.Info("serving the certificate from the Secret", "secret", f.key.String(), "certDir", f.dir,
			"notAfter", pair.Leaf.NotAfter, "dnsNames", pair.Leaf.DNSNames)
	}
	return nil
}

func (f *secretCert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := f.current.Load()
	if c == nil {
		return nil, fmt.Errorf("no serving certificate in Secret %s yet", f.key)
	}
	return c, nil
}

func (f *secretCert) check(*http.Request) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// checkWritableDir creates dir when missing and proves a file can be written there.
func checkWritableDir(dir string) error {
	if dir == "" {
		return errors.New("--cert-dir is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	probe, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}
