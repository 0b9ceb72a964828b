package certs

import (
	"context"
	"crypto/tls"
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Runner is what serve runs for the chosen certificate mode.
type Runner struct {
	checks  map[string]healthz.Checker
	start   func(ctx context.Context) error
	getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// Setup validates the options and prepares the chosen mode against the cluster
// at cfg (unused in files mode, may be nil there). certDir is serve's --cert-dir.
// The logger comes from ctx (controller-runtime's logf.FromContext). Nothing
// talks to the apiserver until Runner.Start.
func (o *Options) Setup(ctx context.Context, cfg *rest.Config, certDir string) (*Runner, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Mode != ModeFiles && cfg == nil {
		return nil, fmt.Errorf("--cert-mode=%s needs a Kubernetes client configuration", o.Mode)
	}
	log := logf.FromContext(ctx).WithName("certs").WithValues("certMode", o.Mode)
	r := &Runner{start: func(ctx context.Context) error { <-ctx.Done(); return nil }}
	switch o.Mode {
	case ModeCertManager:
		reg := o.Registerer
		if reg == nil {
			reg = ctrlmetrics.Registry
		}
		m, err := newMetrics(reg)
		if err != nil {
			return nil, err
		}
		w, err := newCertManagerWatcher(log, o, cfg, m)
		if err != nil {
			return nil, err
		}
		r.checks, r.start = w.checks(), w.start
	case ModeSelfManaged:
		s, err := newSelfManaged(log, o, cfg, certDir)
		if err != nil {
			return nil, err
		}
		r.checks, r.start, r.getCert = s.checks(), s.start, s.cert.getCertificate
	}
	return r, nil
}

// ReadyChecks are the mode's readiness checks by name, for /readyz: in
// cert-manager mode "cert-manager-certificate" (the Certificate is Ready), in
// self-managed mode "cert-rotator" (certificate written, CA injected) and
// "cert-secret" (the Secret's certificate is usable). Files mode has none.
func (r *Runner) ReadyChecks() map[string]healthz.Checker {
	out := make(map[string]healthz.Checker, len(r.checks))
	for k, v := range r.checks {
		out[k] = v
	}
	return out
}

// Start runs the mode's watchers until ctx is done; it returns nil then, and an
// error when the mode cannot go on.
func (r *Runner) Start(ctx context.Context) error { return r.start(ctx) }

// GetCertificate is non-nil in self-managed mode: it returns the serving
// certificate currently in the Secret (an error until Start has read one), for
// the webhook's tls.Config instead of a certwatcher on --cert-dir. In the other
// modes the server reads --cert-dir itself.
func (r *Runner) GetCertificate() func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.getCert
}
