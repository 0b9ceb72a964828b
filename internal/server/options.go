package server

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// maxRequestBytesBound bounds --max-request-bytes: one request body may not
// take more. The API server refuses objects above 3 MiB, and a review of an
// update carries two.
const maxRequestBytesBound = 7 << 20

// Options configure Run. The serve command (internal/command/serve) fills them
// from flags, environment and config file; tests fill them directly.
type Options struct {
	// PolicyPaths are policy files or directories of policy files. They
	// are watched and reloaded.
	PolicyPaths []string
	// AllowEmptyPolicies accepts a policy set with no policy (every pod is
	// then admitted unchanged). Without it, an empty file or a directory
	// without policy files is an invalid set.
	AllowEmptyPolicies bool
	// LeakMitigation is the mode override used while LeakMitigationFile is
	// unset.
	LeakMitigation mutate.LeakMitigation
	// LeakMitigationFile, when set, holds on, off or policy; it is watched
	// and reloaded and wins over LeakMitigation.
	LeakMitigationFile string
	// ExcludeNamespaces are never mutated (kube-system never is).
	ExcludeNamespaces []string
	// StatusAlways gives every pod answered the status annotation
	// (mutate.Options.StatusAlways), for the chart's guard.
	StatusAlways bool
	// AllowedHostPaths, when set, are the directories hostPath assets must
	// lie in: a policy set with one outside is invalid, like any other
	// invalid set (the last good one stays).
	AllowedHostPaths []string
	// ReloadInterval is how often the policy and leak-mitigation files are
	// re-read even when no file event arrived.
	ReloadInterval time.Duration
	// ClusterProbeInterval is how often the apiserver's version and
	// PodLevelResources and ImageVolume gates are read again (default 5m).
	ClusterProbeInterval time.Duration

	// CertDir holds tls.crt and tls.key; they are reloaded when they change.
	// In self-managed mode the certificate mode writes them there.
	CertDir string
	// BindAddress and Port are where the webhook listens (HTTPS).
	BindAddress string
	Port        int
	// TLSMinVersion is tls.VersionTLS12 or tls.VersionTLS13.
	TLSMinVersion uint16
	// MaxRequestBytes limits the AdmissionReview body; larger requests get
	// HTTP 413.
	MaxRequestBytes int64
	// MaxBufferedBytes bounds the request body bytes held at once and
	// MaxInFlight the requests read or answered at once (see
	// requestBudget); a request that finds no room within budgetWait gets
	// HTTP 503.
	MaxBufferedBytes int64
	MaxInFlight      int
	// MaxConnections caps the webhook port's open connections, and
	// MaxConnectionsPerSource those from one source IP; a connection beyond
	// either is closed as soon as it is accepted.
	MaxConnections, MaxConnectionsPerSource int
	// ReadTimeout bounds reading a request body, WriteTimeout the whole
	// request from its start to the end of the response.
	ReadTimeout, WriteTimeout time.Duration
	// ShutdownDelay is how long the server keeps answering, while not
	// ready and with keep-alive off, after it was told to stop and before
	// it closes its listener and drains: time for the endpoints to drop it.
	ShutdownDelay time.Duration
	// IdleDrain is how long, after the delay, the server leaves clients to
	// close their keep-alive connections before closing the idle ones
	// itself; the API server closes an idle one after 90 s.
	IdleDrain time.Duration

	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz, /readyz and /status; "0"
	// disables it.
	HealthProbeBindAddress string

	// KubeClient reads namespaces (list and watch only), /version and
	// /metrics (the PodLevelResources and ImageVolume gates). When nil, one is
	// made from RESTConfig.
	KubeClient kubernetes.Interface
	// RESTConfig is the manager's (and the certificate mode's) client
	// configuration; required.
	RESTConfig *rest.Config

	Logger logr.Logger

	// Certificates is the certificate mode; nil is files mode (CertDir).
	Certificates *certs.Options
}

// complete defaults unset fields and checks the rest.
func (o *Options) complete() error {
	var errs []error
	if len(o.PolicyPaths) == 0 {
		errs = append(errs, errors.New("at least one --policy file or directory is required"))
	}
	o.LeakMitigation = cmp.Or(o.LeakMitigation, mutate.LeakMitigationPolicy)
	if _, ok := mutate.ParseLeakMitigation(string(o.LeakMitigation)); !ok {
		errs = append(errs, fmt.Errorf("--leak-mitigation %q: must be on, off or policy", o.LeakMitigation))
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = 30 * time.Second
	}
	if o.ClusterProbeInterval <= 0 {
		o.ClusterProbeInterval = 5 * time.Minute
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir is required"))
	} else {
		o.CertDir = filepath.Clean(o.CertDir)
	}
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: must be between 1 and 65535", o.Port))
	}
	o.TLSMinVersion = cmp.Or(o.TLSMinVersion, tls.VersionTLS13)
	if o.TLSMinVersion != tls.VersionTLS12 && o.TLSMinVersion != tls.VersionTLS13 {
		errs = append(errs, errors.New("--tls-min-version: must be 1.2 or 1.3"))
	}
	o.MaxRequestBytes = cmp.Or(o.MaxRequestBytes, 3<<20)
	if o.MaxRequestBytes < 0 || o.MaxRequestBytes >= maxRequestBytesBound {
		errs = append(errs, fmt.Errorf("--max-request-bytes %d: must be between 1 and %d",
			o.MaxRequestBytes, maxRequestBytesBound-1))
	}
	o.MaxBufferedBytes = cmp.Or(o.MaxBufferedBytes, 32<<20)
	if o.MaxBufferedBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-buffered-bytes %d: must be positive", o.MaxBufferedBytes))
	}
	if o.MaxRequestBytes > 0 && o.MaxBufferedBytes > 0 && largeShare(o.MaxBufferedBytes) < o.MaxRequestBytes {
		errs = append(errs, fmt.Errorf("--max-buffered-bytes %d: bodies above 64Ki may use three quarters of it, %d bytes, less than --max-request-bytes %d; raise it to at least %d",
			o.MaxBufferedBytes, largeShare(o.MaxBufferedBytes), o.MaxRequestBytes, (o.MaxRequestBytes*4+2)/3))
	}
	o.MaxInFlight = cmp.Or(o.MaxInFlight, 256)
	if o.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("--max-in-flight %d: must be positive", o.MaxInFlight))
	}
	o.MaxConnections = cmp.Or(o.MaxConnections, defaultMaxConnections)
	o.MaxConnectionsPerSource = cmp.Or(o.MaxConnectionsPerSource, min(defaultMaxConnectionsPerSource, o.MaxConnections))
	if o.MaxConnections < 0 || o.MaxConnectionsPerSource < 0 || o.MaxConnectionsPerSource > o.MaxConnections {
		errs = append(errs, fmt.Errorf("--max-connections %d and --max-connections-per-source %d: must be positive, the second at most the first",
			o.MaxConnections, o.MaxConnectionsPerSource))
	}
	if o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.ShutdownDelay < 0 || o.IdleDrain < 0 {
		errs = append(errs, errors.New("--read-timeout, --write-timeout, --shutdown-delay and --idle-drain must not be negative"))
	}
	if o.MetricsBindAddress != "0" && o.MetricsBindAddress != "" && o.MetricsBindAddress == o.HealthProbeBindAddress {
		errs = append(errs, fmt.Errorf("--metrics-bind-address and --health-probe-bind-address are both %q", o.MetricsBindAddress))
	}
	if o.RESTConfig == nil {
		errs = append(errs, errors.New("no Kubernetes client configuration"))
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return errors.Join(errs...)
}
