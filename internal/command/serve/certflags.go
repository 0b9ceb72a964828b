package serve

import (
	"github.com/spf13/pflag"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
)

// certificateFlags defines serve's certificate flags (--cert-mode and the names
// each mode needs) on fs, filling o.
func certificateFlags(fs *pflag.FlagSet, o *certs.Options) {
	fs.Var(&o.Mode, "cert-mode", "where the serving certificate comes from: files (--cert-dir), self-managed (rotated in --cert-secret) or cert-manager (--certificate)")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of --cert-secret and --certificate (default $POD_NAMESPACE)")
	fs.StringVar(&o.Secret, "cert-secret", o.Secret, "self-managed: Secret in --namespace holding the CA and serving certificate (must exist; may be empty)")
	fs.StringVar(&o.WebhookConfig, "webhook-config", o.WebhookConfig, "MutatingWebhookConfiguration whose caBundle is kept in sync (self-managed) or checked for the cainjector race (cert-manager)")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "self-managed: Service name; the serving certificate is for NAME.NAMESPACE.svc")
	fs.StringVar(&o.Certificate, "certificate", o.Certificate, "cert-manager: the Certificate in --namespace to watch for Ready and not-after")
	fs.StringSliceVar(&o.ExtraDNSNames, "cert-extra-dns-name", o.ExtraDNSNames, "self-managed: extra DNS name for the serving certificate (repeatable), e.g. localhost for a webhook outside the cluster")
}
