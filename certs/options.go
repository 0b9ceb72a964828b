package certs

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Mode says where the serving certificate in --cert-dir comes from.
type Mode string

const (
	// ModeFiles: --cert-dir is filled by someone else (a mounted Secret, `certs
	// generate`); the server only reads it.
	ModeFiles Mode = "files"
	// ModeSelfManaged: the server keeps a CA and serving certificate in --cert-secret,
	// rotates them, writes them to --cert-dir and keeps --webhook-config's caBundle in sync.
	ModeSelfManaged Mode = "self-managed"
	// ModeCertManager: cert-manager issues the certificate into a mounted Secret; the
	// server watches --certificate for readiness and expiry and --webhook-config for
	// an empty caBundle.
	ModeCertManager Mode = "cert-manager"
)

var modes = []Mode{ModeFiles, ModeSelfManaged, ModeCertManager}

// Options are the certificate settings of `serve` (its --cert-* flags,
// defined in internal/command/serve).
type Options struct {
	Mode          Mode
	Namespace     string
	Secret        string
	WebhookConfig string
	ServiceName   string
	Certificate   string
	// ExtraDNSNames are added to the self-managed serving certificate, e.g.
	// "localhost" when the webhook runs outside the cluster behind webhook.url.
	ExtraDNSNames []string

	// Registerer receives the certificate metrics; nil means controller-runtime's
	// global registry, which serve exposes on /metrics. Not a flag.
	Registerer prometheus.Registerer

	// controllerName overrides the self-managed rotator's controller name, which
	// controller-runtime requires to be unique in a process (tests run several).
	controllerName string
}

// NewOptions returns the defaults: files mode, --namespace from $POD_NAMESPACE.
func NewOptions() *Options {
	return &Options{Mode: ModeFiles, Namespace: os.Getenv("POD_NAMESPACE")}
}

// Validate checks the flag combination for the chosen mode: required flags are
// set, and flags that the mode would silently ignore are rejected.
func (o *Options) Validate() error {
	var errs []error
	need := func(flag, value string) {
		if value == "" {
			errs = append(errs, fmt.Errorf("--cert-mode=%s needs --%s", o.Mode, flag))
		}
	}
	unused := func(flag string, set bool) {
		if set {
			errs = append(errs, fmt.Errorf("--%s has no effect with --cert-mode=%s", flag, o.Mode))
		}
	}
	name := func(flag, value string, check func(string) []string) {
		if value == "" {
			return
		}
		if msgs := check(value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--%s %q: %s", flag, value, strings.Join(msgs, "; ")))
		}
	}
	name("namespace", o.Namespace, validation.IsDNS1123Label)
	name("cert-secret", o.Secret, validation.IsDNS1123Subdomain)
	name("webhook-config", o.WebhookConfig, validation.IsDNS1123Subdomain)
	name("service-name", o.ServiceName, validation.IsDNS1035Label)
	name("certificate", o.Certificate, validation.IsDNS1123Subdomain)
	for _, n := range o.ExtraDNSNames {
		name("cert-extra-dns-name", n, validation.IsDNS1123Subdomain)
	}

	switch o.Mode {
	case ModeFiles:
		// --namespace defaults from $POD_NAMESPACE and is harmless here.
		unused("cert-secret", o.Secret != "")
		unused("webhook-config", o.WebhookConfig != "")
		unused("service-name", o.ServiceName != "")
		unused("certificate", o.Certificate != "")
		unused("cert-extra-dns-name", len(o.ExtraDNSNames) > 0)
	case ModeSelfManaged:
		need("cert-secret", o.Secret)
		need("webhook-config", o.WebhookConfig)
		need("service-name", o.ServiceName)
		need("namespace (or $POD_NAMESPACE)", o.Namespace)
		unused("certificate", o.Certificate != "")
	case ModeCertManager:
		need("certificate", o.Certificate)
		need("namespace (or $POD_NAMESPACE)", o.Namespace)
		unused("cert-secret", o.Secret != "")
		unused("service-name", o.ServiceName != "")
		unused("cert-extra-dns-name", len(o.ExtraDNSNames) > 0)
	default:
		errs = append(errs, fmt.Errorf("--cert-mode %q: must be one of %s", o.Mode, modeList()))
	}
	return errors.Join(errs...)
}

// RBAC returns the rules the chosen mode needs: namespaced ones for a Role in
// --namespace and cluster-scoped ones for a ClusterRole. Files mode needs none.
// The chart renders exactly these (see the package documentation for why each
// verb is there); the envtest suite runs each mode as a user holding only them.
func (o *Options) RBAC() (role, clusterRole []rbacv1.PolicyRule) {
	switch o.Mode {
	case ModeSelfManaged:
		role = []rbacv1.PolicyRule{
			// cert-controller's cache lists and watches Secrets namespace-wide;
			// writes go to the one Secret only.
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{o.Secret}, Verbs: []string{"update"}},
		}
		clusterRole = []rbacv1.PolicyRule{
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{o.WebhookConfig}, Verbs: []string{"update"}},
		}
	case ModeCertManager:
		// Both informers select their one object with a metadata.name field
		// selector, which is what lets RBAC restrict list and watch by name.
		role = []rbacv1.PolicyRule{
			{APIGroups: []string{"cert-manager.io"}, Resources: []string{"certificates"}, ResourceNames: []string{o.Certificate}, Verbs: []string{"list", "watch"}},
		}
		if o.WebhookConfig != "" {
			clusterRole = []rbacv1.PolicyRule{
				{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{o.WebhookConfig}, Verbs: []string{"list", "watch"}},
			}
		}
	}
	return role, clusterRole
}

func modeList() string {
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, "|")
}

// Set parses a mode, or fails with an error that lists the modes. With
// String and Type it makes a Mode the value of serve's --cert-mode flag (a
// pflag.Value), so that an unknown mode is refused while the flags are
// parsed.
func (m *Mode) Set(s string) error {
	if !slices.Contains(modes, Mode(s)) {
		return fmt.Errorf("must be one of %s", modeList())
	}
	*m = Mode(s)
	return nil
}

// String returns the mode, files when unset.
func (m *Mode) String() string { return string(cmp.Or(*m, ModeFiles)) }

// Type names the flag's value in --help.
func (m *Mode) Type() string { return "mode" }
