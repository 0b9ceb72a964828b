package certs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"
	cminformers "github.com/cert-manager/cert-manager/pkg/client/informers/externalversions"
	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// resync re-delivers the watched objects from the local cache (no apiserver
// request) so that a bad state is logged again every period until it is fixed.
const resync = time.Minute

// certManagerWatcher follows one cert-manager Certificate (readiness, not-after
// metric) and, optionally, the MutatingWebhookConfiguration that cert-manager's
// cainjector should fill. Both informers select their single object by name.
type certManagerWatcher struct {
	log           logr.Logger
	namespace     string
	certificate   string
	webhookConfig string
	metrics       *metrics

	certFactory cminformers.SharedInformerFactory
	certs       toolscache.SharedIndexInformer
	kubeFactory informers.SharedInformerFactory // nil without --webhook-config
	mwcs        toolscache.SharedIndexInformer

	mu        sync.Mutex
	ready     bool
	notReason string // why not ready, for the readiness check's body

	caLogged atomic.Bool // whether an empty caBundle was logged, to log its fix once
}

func newCertManagerWatcher(log logr.Logger, o *Options, cfg *rest.Config, m *metrics) (*certManagerWatcher, error) {
	cm, err := cmclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cert-manager client: %w", err)
	}
	w := &certManagerWatcher{
		log:           log.WithValues("certificate", o.Namespace+"/"+o.Certificate),
		namespace:     o.Namespace,
		certificate:   o.Certificate,
		webhookConfig: o.WebhookConfig,
		metrics:       m,
	}
	w.setState(false, "Certificate not observed yet")
	m.setNotAfter(time.Time{})

	w.certFactory = cminformers.NewSharedInformerFactoryWithOptions(cm, resync,
		cminformers.WithNamespace(o.Namespace),
		cminformers.WithTweakListOptions(byName(o.Certificate)))
	w.certs = w.certFactory.Certmanager().V1().Certificates().Informer()
	if err := w.follow(w.certs, "Certificate", "certificates.cert-manager.io", o.Certificate, w.observeCertificate, w.certificateGone); err != nil {
		return nil, err
	}

	if o.WebhookConfig != "" {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		w.kubeFactory = informers.NewSharedInformerFactoryWithOptions(kube, resync,
			informers.WithTweakListOptions(byName(o.WebhookConfig)))
		w.mwcs = w.kubeFactory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
		if err := w.follow(w.mwcs, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations.admissionregistration.k8s.io",
			o.WebhookConfig, w.observeWebhookConfig, w.webhookConfigGone); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// byName restricts a list or watch to one object; RBAC can then grant list and
// watch with resourceNames.
func byName(name string) func(*metav1.ListOptions) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return func(o *metav1.ListOptions) { o.FieldSelector = sel }
}

// follow passes the events of inf, which watches the object name of
// resource, to observe and gone. A refused list or watch is reported loudly
// with the RBAC it needs; other errors take client-go's default path (logged,
// retried with backoff).
func (w *certManagerWatcher) follow(inf toolscache.SharedIndexInformer, kind, resource, name string, observe func(any), gone func()) error {
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(any) { gone() },
	}); err != nil {
		return fmt.Errorf("watching %s: %w", kind, err)
	}
	return inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			w.log.Error(err, "not allowed to list and watch "+resource+" "+name,
				"fix", fmt.Sprintf("grant list and watch on %s with resourceNames [%s] (the chart's RBAC for certificates.mode=certManager)", resource, name))
			return
		}
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

func (w *certManagerWatcher) start(ctx context.Context) error {
	w.certFactory.Start(ctx.Done())
	defer w.certFactory.Shutdown()
	synced := []toolscache.InformerSynced{w.certs.HasSynced}
	if w.kubeFactory != nil {
		w.kubeFactory.Start(ctx.Done())
		defer w.kubeFactory.Shutdown()
		synced = append(synced, w.mwcs.HasSynced)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("cert-manager mode: informers did not sync")
	}
	// Report objects that were not there when the informers synced; an
	// absent object sends no events.
	if _, exists, _ := w.certs.GetStore().GetByKey(w.namespace + "/" + w.certificate); !exists {
		w.certificateGone()
	}
	if w.mwcs != nil {
		if _, exists, _ := w.mwcs.GetStore().GetByKey(w.webhookConfig); !exists {
			w.webhookConfigGone()
		}
	}
	<-ctx.Done()
	return nil
}

func (w *certManagerWatcher) readyCheck(*http.Request) error {
	if !w.certs.HasSynced() {
		return errors.New("the informer for the Certificate has not synced")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ready {
		return fmt.Errorf("cert-manager Certificate %s/%s is not Ready: %s", w.namespace, w.certificate, w.notReason)
	}
	return nil
}

func (w *certManagerWatcher) observeCertificate(obj any) {
	crt, ok := obj.(*cmapi.Certificate)
	if !ok {
		return
	}
	notAfter := ptr.Deref(crt.Status.NotAfter, metav1.Time{}).Time
	w.metrics.setNotAfter(notAfter)

	var cond *cmapi.CertificateCondition
	for i := range crt.Status.Conditions {
		if crt.Status.Conditions[i].Type == cmapi.CertificateConditionReady {
			cond = &crt.Status.Conditions[i]
		}
	}
	ready := cond != nil && cond.Status == cmmeta.ConditionTrue
	reason := "no Ready condition yet"
	if cond != nil {
		reason = fmt.Sprintf("Ready=%s reason=%q message=%q", cond.Status, cond.Reason, cond.Message)
	}
	if wasReady := w.setState(ready, reason); ready {
		if !wasReady {
			w.log.Info("Certificate is Ready", "notAfter", notAfter)
		}
		return
	}
	kv := []any{"fix", fmt.Sprintf("kubectl -n %[1]s describe certificate %[2]s; kubectl -n %[1]s get certificaterequests,issuers; then check cert-manager's logs (kubectl -n cert-manager logs deploy/cert-manager)", w.namespace, w.certificate)}
	if cond != nil {
		kv = append(kv, "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	}
	if !notAfter.IsZero() {
		kv = append(kv, "notAfter", notAfter)
	}
	w.log.Error(nil, "cert-manager Certificate of the webhook is not Ready: its serving certificate is not issued or not renewed, and admission fails once the mounted certificate expires", kv...)
}

func (w *certManagerWatcher) certificateGone() {
	w.metrics.setNotAfter(time.Time{})
	w.setState(false, "Certificate does not exist")
	w.log.Error(nil, "cert-manager Certificate of the webhook does not exist: nothing issues or renews its serving certificate",
		"fix", fmt.Sprintf("install the chart with certificates.mode=certManager (it creates Certificate %s/%s), or point --certificate and --namespace at the Certificate that writes the Secret mounted at --cert-dir", w.namespace, w.certificate))
}

// setState records whether the Certificate is Ready, and why not, and
// returns whether it was: Ready is logged once, when it becomes so.
func (w *certManagerWatcher) setState(ready bool, reason string) (wasReady bool) {
	w.mu.Lock()
	wasReady, w.ready, w.notReason = w.ready, ready, reason
	w.mu.Unlock()
	w.metrics.setReady(ready)
	return wasReady
}

func (w *certManagerWatcher) observeWebhookConfig(obj any) {
	mwc, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	if !ok {
		return
	}
	var empty []string
	for _, wh := range mwc.Webhooks {
		if len(wh.ClientConfig.CABundle) == 0 {
			empty = append(empty, wh.Name)
		}
	}
	if len(empty) == 0 {
		if w.caLogged.Swap(false) {
			w.log.Info("caBundle of the MutatingWebhookConfiguration is injected", "webhookConfig", mwc.Name)
		}
		return
	}
	w.caLogged.Store(true)

	want := w.namespace + "/" + w.certificate
	fix := fmt.Sprintf("cert-manager's cainjector fills caBundle from Certificate %s once it is Ready; check that the cainjector runs (kubectl -n cert-manager logs deploy/cert-manager-cainjector) and that the Certificate is Ready (kubectl -n %s get certificate %s)", want, w.namespace, w.certificate)
	if got := mwc.Annotations[cmapi.WantInjectAnnotation]; got != want {
		fix = fmt.Sprintf("annotate it so cert-manager's cainjector fills caBundle: kubectl annotate mutatingwebhookconfiguration %s %s=%s --overwrite (it is %q now)", mwc.Name, cmapi.WantInjectAnnotation, want, got)
	}
	w.log.Error(nil, "caBundle of the MutatingWebhookConfiguration is empty: the apiserver cannot verify the webhook's certificate, so admission of every selected pod fails (failurePolicy Fail) or skips the webhook (Ignore)",
		"webhookConfig", mwc.Name, "webhooks", strings.Join(empty, ","), "fix", fix)
}

func (w *certManagerWatcher) webhookConfigGone() {
	w.log.Error(nil, "MutatingWebhookConfiguration does not exist: the apiserver never calls the webhook and sandbox pods run unmutated",
		"webhookConfig", w.webhookConfig,
		"fix", fmt.Sprintf("reinstall or upgrade the chart so it renders MutatingWebhookConfiguration %s, or correct --webhook-config", w.webhookConfig))
}
