package certs

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sandbox-webhook/sandbox-webhook/server"
)

// ServeExtension plugs the certificate modes into `serve`:
//
//	server.NewCommand(certs.NewServeExtension())
//
// It adds the --cert-mode flag family (with serve's environment variables and
// config file keys) and, for a mode other than files, sets the server's
// GetCertificate (self-managed), readiness checks and a runnable.
type ServeExtension struct {
	Options *Options
}

var _ server.Extension = (*ServeExtension)(nil)

// NewServeExtension returns the extension with NewOptions' defaults.
func NewServeExtension() *ServeExtension {
	return &ServeExtension{Options: NewOptions()}
}

// AddFlags adds the certificate flags to serve's flag set.
func (e *ServeExtension) AddFlags(fs *pflag.FlagSet) { e.Options.AddFlags(fs) }

// Apply validates the certificate flags and adjusts the server's options.
func (e *ServeExtension) Apply(ctx context.Context, o *server.Options) error {
	if o.Logger.GetSink() != nil {
		ctx = logf.IntoContext(ctx, o.Logger)
	}
	r, err := e.Options.Setup(ctx, o.RESTConfig, o.CertDir)
	if err != nil {
		return err
	}
	if e.Options.Mode == ModeFiles {
		return nil
	}
	if get := r.GetCertificate(); get != nil {
		o.GetCertificate = get
	}
	if o.ReadyChecks == nil {
		o.ReadyChecks = map[string]healthz.Checker{}
	}
	for name, check := range r.ReadyChecks() {
		if _, dup := o.ReadyChecks[name]; dup {
			return fmt.Errorf("readiness check %q is defined twice", name)
		}
		o.ReadyChecks[name] = check
	}
	if o.Runnables == nil {
		o.Runnables = map[string]server.Runnable{}
	}
	o.Runnables["certificates"] = r.Start
	return nil
}
