package certs

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"maps"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Runner is what the chosen certificate mode gives serve besides the
// runnables it adds to serve's manager.
type Runner struct {
	checks  map[string]healthz.Checker
	getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	explain func(error) error
}

// Setup validates the options and adds the chosen mode's watchers to mgr,
// serve's manager, which runs them with the webhook (files mode adds
// nothing). certDir is serve's --cert-dir. The logger comes from ctx
// (controller-runtime's logf.FromContext). Nothing talks to the apiserver
// until mgr starts.
func (o *Options) Setup(ctx context.Context, mgr manager.Manager, certDir string) (*Runner, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := logf.FromContext(ctx).WithName("certs").WithValues("certMode", o.Mode)
	switch o.Mode {
	case ModeCertManager:
		m, err := newMetrics(cmp.Or[prometheus.Registerer](o.Registerer, ctrlmetrics.Registry))
		if err != nil {
			return nil, err
		}
		w, err := newCertManagerWatcher(log, o, mgr.GetConfig(), m)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(manager.RunnableFunc(w.start)); err != nil {
			return nil, fmt.Errorf("cert-manager mode: %w", err)
		}
		return &Runner{checks: map[string]healthz.Checker{"cert-manager-certificate": w.readyCheck}}, nil
	case ModeSelfManaged:
		return newSelfManaged(log, o, mgr, certDir)
	}
	return &Runner{}, nil
}

// ReadyChecks are the mode's readiness checks by name, for /readyz: in
// cert-manager mode "cert-manager-certificate" (the Certificate is Ready), in
// self-managed mode "cert-rotator" (certificate written, CA injected) and
// "cert-secret" (the Secret's certificate is usable). Files mode has none.
func (r *Runner) ReadyChecks() map[string]healthz.Checker { return maps.Clone(r.checks) }

// GetCertificate is non-nil in self-managed mode: it returns the serving
// certificate currently in the Secret (an error until the manager has read
// one), for the webhook's tls.Config instead of a certwatcher on --cert-dir.
// In the other modes the server reads --cert-dir itself.
func (r *Runner) GetCertificate() func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.getCert
}

// Explain returns err, an error the manager stopped with, with what the mode
// knows of its cause (in self-managed mode: a missing Secret).
func (r *Runner) Explain(err error) error {
	if r.explain == nil {
		return err
	}
	return r.explain(err)
}
