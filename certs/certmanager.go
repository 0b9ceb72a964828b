package certs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
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
	"sigs.k8s.io/controller-runtime/pkg/healthz"
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
	certSynced  toolscache.InformerSynced
	kubeFactory informers.SharedInformerFactory // nil without --webhook-config
	mwcSynced   toolscache.InformerSynced

	mu        sync.Mutex
	ready     bool
	notReason string // why not ready, for the readiness check's body
	lastGood  bool   // whether Ready was the last logged state, to log Ready once
	caLogged  bool   // whether an empty caBundle was logged, to log its fix once
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
		notReason:     "Certificate not observed yet",
	}
	m.setReady(false)
	m.setNotAfter(time.Time{})

	w.certFactory = cminformers.NewSharedInformerFactoryWithOptions(cm, resync,
		cminformers.WithNamespace(o.Namespace),
		cminformers.WithTweakListOptions(byName(o.Certificate)))
	certInformer := w.certFactory.Certmanager().V1().Certificates().Informer()
	if _, err := certInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observeCertificate(obj) },
		UpdateFunc: func(_, obj any) { w.observeCertificate(obj) },
		DeleteFunc: func(any) { w.certificateGone() },
	}); err != nil {
		return nil, fmt.Errorf("watching Certificate: %w", err)
	}
	if err := certInformer.SetWatchErrorHandlerWithContext(w.watchErrors("certificates.cert-manager.io", o.Certificate)); err != nil {
		return nil, err
	}
	w.certSynced = certInformer.HasSynced

	if o.WebhookConfig != "" {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		w.kubeFactory = informers.NewSharedInformerFactoryWithOptions(kube, resync,
			informers.WithTweakListOptions(byName(o.WebhookConfig)))
		mwcInformer := w.kubeFactory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
		if _, err := mwcInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.observeWebhookConfig(obj) },
			UpdateFunc: func(_, obj any) { w.observeWebhookConfig(obj) },
			DeleteFunc: func(any) { w.webhookConfigGone() },
		}); err != nil {
			return nil, fmt.Errorf("watching MutatingWebhookConfiguration: %w", err)
		}
		if err := mwcInformer.SetWatchErrorHandlerWithContext(w.watchErrors("mutatingwebhookconfigurations.admissionregistration.k8s.io", o.WebhookConfig)); err != nil {
			return nil, err
		}
		w.mwcSynced = mwcInformer.HasSynced
	}
	return w, nil
}

// byName restricts a list or watch to one object; RBAC can then grant list and
// watch with resourceNames.
func byName(name string) func(*metav1.ListOptions) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return func(o *metav1.ListOptions) { o.FieldSelector = sel }
}

// watchErrors reports a refused list or watch loudly with the RBAC it needs;
// other errors take client-go's default path (logged, retried with backoff).
func (w *certManagerWatcher) watchErrors(resource, name string) toolscache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			w.log.Error(err, "not allowed to list and watch "+resource+" "+name,
				"fix", fmt.Sprintf("grant list and watch on %s with resourceNames [%s] (the chart's RBAC for certificates.mode=certManager)", resource, name))
			return
		}
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

func (w *certManagerWatcher) start(ctx context.Context) error {
	w.certFactory.Start(ctx.Done())
	defer w.certFactory.Shutdown()
	synced := []toolscache.InformerSynced{w.certSynced}
	if w.kubeFactory != nil {
		w.kubeFactory.Start(ctx.Done())
		defer w.kubeFactory.Shutdown()
		synced = append(synced, w.mwcSynced)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("cert-manager mode: informers did not sync")
	}
	w.checkPresence()
	<-ctx.Done()
	return nil
}

// checkPresence reports objects that were not there when the informers synced;
// an absent object sends no events.
func (w *certManagerWatcher) checkPresence() {
	if _, exists, _ := w.certFactory.Certmanager().V1().Certificates().Informer().GetStore().GetByKey(w.namespace + "/" + w.certificate); !exists {
		w.certificateGone()
	}
	if w.kubeFactory != nil {
		if _, exists, _ := w.kubeFactory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer().GetStore().GetByKey(w.webhookConfig); !exists {
			w.webhookConfigGone()
		}
	}
}

func (w *certManagerWatcher) readyCheck(*http.Request) error {
	if !w.certSynced() {
		return errors.New("the informer for the Certificate has not synced")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ready {
		return fmt.Errorf("cert-manager Certificate %s/%s is not Ready: %s", w.namespace, w.certificate, w.notReason)
	}
	return nil
}

func (w *certManagerWatcher) checks() map[string]healthz.Checker {
	return map[string]healthz.Checker{"cert-manager-certificate": w.readyCheck}
}

func (w *certManagerWatcher) observeCertificate(obj any) {
	crt, ok := obj.(*cmapi.Certificate)
	if !ok {
		return
	}
	var notAfter time.Time
	if crt.Status.NotAfter != nil {
		notAfter = crt.Status.NotAfter.Time
	}
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
	w.setState(ready, reason)
	if ready {
		if !w.swapLogged(true) {
			w.log.Info("Certificate is Ready", "notAfter", notAfter)
		}
		return
	}
	w.swapLogged(false)
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
	w.swapLogged(false)
	w.log.Error(nil, "cert-manager Certificate of the webhook does not exist: nothing issues or renews its serving certificate",
		"fix", fmt.Sprintf("install the chart with certificates.mode=certManager (it creates Certificate %s/%s), or point --certificate and --namespace at the Certificate that writes the Secret mounted at --cert-dir", w.namespace, w.certificate))
}

func (w *certManagerWatcher) setState(ready bool, reason string) {
	w.mu.Lock()
	w.ready, w.notReason = ready, reason
	w.mu.Unlock()
	w.metrics.setReady(ready)
}

// swapLogged records good as the last logged state and returns the previous one.
func (w *certManagerWatcher) swapLogged(good bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.lastGood
	w.lastGood = good
	return prev
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
		w.mu.Lock()
		wasLogged := w.caLogged
		w.caLogged = false
		w.mu.Unlock()
		if wasLogged {
			w.log.Info("caBundle of the MutatingWebhookConfiguration is injected", "webhookConfig", mwc.Name)
		}
		return
	}
	w.mu.Lock()
	w.caLogged = true
	w.mu.Unlock()

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
