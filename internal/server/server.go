// Package server is `sandbox-webhook serve`: one controller-runtime manager
// running the webhook server with the admission handler at /mutate-v1-pod,
// hot-reloaded policy files, a namespace cache, the certificate mode, health
// and status endpoints, Prometheus metrics and a graceful shutdown.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandbox-webhook/sandbox-webhook/certs"
	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
)

// Run serves admissions until ctx ends, then shuts down gracefully: it turns
// not ready and answers with "Connection: close" at once, keeps answering for
// ShutdownDelay, then stops the manager, which closes the webhook listener,
// leaves clients up to IdleDrain to close their keep-alive connections,
// waits for in-flight reviews to be answered (up to drainTimeout) and closes
// the remaining connections.
func Run(ctx context.Context, o Options) error {
	if err := o.complete(); err != nil {
		return err
	}
	s, err := newServer(ctx, &o)
	if err != nil {
		return err
	}
	return s.run(ctx)
}

// server is one controller-runtime manager running everything serve does:
// the webhook server (webhookServer, the manager's WebhookServer), the
// health port (a manager.Server), the metrics on the manager's metrics
// server, the policy reloader, the namespace cache, the cluster probe, the
// certificate watcher or the certificate mode's watchers.
type server struct {
	opts       *Options
	log        logr.Logger
	mgr        manager.Manager
	registry   *registry
	metrics    *serverMetrics
	admission  *admission.Metrics
	config     atomic.Pointer[admission.Config]
	reloader   *reloader
	namespaces *namespaceCache
	cluster    *clusterProbe
	// lookup is what the handler reads namespaces through.
	lookup      admission.NamespaceLookup
	getCert     func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	webhook     *webhookServer
	certs       *certs.Runner
	readyChecks map[string]healthz.Checker
	draining    atomic.Bool
	// budget bounds the request bodies held at once.
	budget *requestBudget
	// after is time.After; tests end the shutdown delay themselves.
	after func(time.Duration) <-chan time.Time
}

// drainTimeout bounds how long the stopping webhook server waits for the
// requests in flight.
const drainTimeout = time.Minute

func newServer(ctx context.Context, o *Options) (_ *server, err error) {
	s := &server{
		opts:     o,
		log:      o.Logger,
		registry: &registry{},
		after:    time.After,
		budget:   newRequestBudget(o.MaxBufferedBytes, o.MaxInFlight),
	}
	defer func() {
		if err != nil {
			s.registry.unregisterAll()
		}
	}()
	s.metrics = newServerMetrics(s.registry)
	s.admission = admission.NewMetrics(s.registry)
	s.reloader = newReloader(o, &s.config, s.metrics)

	client := o.KubeClient
	if client == nil {
		if client, err = kubernetes.NewForConfig(o.RESTConfig); err != nil {
			return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
		}
	}
	s.namespaces = newNamespaceCache(client)
	s.cluster = &clusterProbe{
		log:      o.Logger.WithName("cluster"),
		client:   client,
		interval: o.ClusterProbeInterval,
		publish:  s.reloader.setCluster,
		status:   ClusterStatus{PodLevelResources: "unknown", ImageVolumes: "unknown"},
	}
	s.lookup = s.namespaces.Lookup

	s.webhook = newWebhookServer(webhook.Options{
		Host:    o.BindAddress,
		Port:    o.Port,
		TLSOpts: []func(*tls.Config){s.tlsConfig},
	}, httpErrorLog(o.Logger), o.IdleDrain)
	s.webhook.limits = connLimits{Total: o.MaxConnections, PerSource: o.MaxConnectionsPerSource}
	s.webhook.refused = s.metrics.connRefusals.WithLabelValues(portWebhook)
	grace := o.IdleDrain + drainTimeout + 10*time.Second
	mgr, err := manager.New(o.RESTConfig, manager.Options{
		Logger: o.Logger,
		// The metrics and health ports are the server's own (portServer):
		// the manager's take 1 MiB request heads for 32 s from any number
		// of connections, and its probe server has no room for /status
		// and the notices of /readyz?verbose.
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		WebhookServer:           s.webhook,
		GracefulShutdownTimeout: &grace,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	s.mgr = mgr

	getCert, err := s.setupCertificates(ctx)
	if err != nil {
		return nil, err
	}
	s.getCert = s.recordCertificate(getCert)

	for _, r := range []manager.Runnable{
		manager.RunnableFunc(s.reloader.run),
		manager.RunnableFunc(s.namespaces.run),
		manager.RunnableFunc(s.cluster.run),
	} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// setupCertificates sets up the certificate mode on the manager and the
// readiness checks, and returns where the serving certificate comes from.
func (s *server) setupCertificates(ctx context.Context) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	o := s.opts
	s.readyChecks = s.ownReadyChecks()
	r, err := cmp.Or(o.Certificates, certs.NewOptions()).Setup(logf.IntoContext(ctx, o.Logger), s.mgr, o.CertDir)
	if err != nil {
		return nil, err
	}
	s.certs = r
	for name, c := range r.ReadyChecks() {
		if _, dup := s.readyChecks[name]; dup {
			return nil, fmt.Errorf("readiness check %q is defined twice", name)
		}
		s.readyChecks[name] = c
	}
	if get := r.GetCertificate(); get != nil {
		return get, nil
	}
	// The same watcher controller-runtime would start from CertDir, owned
	// here so that readiness and the not-after metric see the certificate
	// actually served.
	cw, err := certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate from --cert-dir %s: %w", o.CertDir, err)
	}
	cw.RegisterCallback(func(c tls.Certificate) { s.metrics.observeCertificate(&c) })
	if err := s.mgr.Add(cw); err != nil {
		return nil, err
	}
	return cw.GetCertificate, nil
}

// recordCertificate wraps get so that the expiry of every new certificate it
// returns reaches the metrics and /status.
func (s *server) recordCertificate(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	var last atomic.Pointer[tls.Certificate]
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := get(hello)
		if c != nil && last.Swap(c) != c {
			s.metrics.observeCertificate(c)
		}
		return c, err
	}
}

// tlsConfig is the server's own part of the webhook's TLS configuration.
func (s *server) tlsConfig(c *tls.Config) {
	c.MinVersion = s.opts.TLSMinVersion
	// TLS 1.2 only with forward-secret AEAD suites (TLS 1.3 has no others);
	// Go would otherwise also accept the CBC ones.
	c.CipherSuites = tls12CipherSuites
	// HTTP/1.1 only: the API server calls webhooks over HTTP/1.1, HTTP/2
	// adds attack surface (CVE-2023-44487), and a shutting-down HTTP/1.1
	// server can tell each client to reconnect with "Connection: close".
	c.NextProtos = []string{"http/1.1"}
	c.GetCertificate = s.getCert
}

// tls12CipherSuites are the TLS 1.2 suites the webhook accepts: ECDHE with
// AES-GCM or ChaCha20-Poly1305, what the API server's Go client offers first.
var tls12CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

func (s *server) run(ctx context.Context) error {
	log := s.log
	o := s.opts
	defer s.registry.unregisterAll()

	s.mgr.GetWebhookServer().Register(admission.Path, s.gate(admission.NewHandler(&s.config, s.lookup, s.admission, log).Webhook()))
	// Listen on the metrics and health ports first so that a clash fails
	// at once.
	for _, p := range []struct {
		name, what, addr string
		handler          http.Handler
	}{
		{portMetrics, "metrics", o.MetricsBindAddress, s.metricsHandler()},
		{portHealth, "health probes", o.HealthProbeBindAddress, s.healthHandler()},
	} {
		if p.addr == "" || p.addr == "0" {
			continue
		}
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("listening for %s on %s: %w", p.what, p.addr, err)
		}
		if err := s.mgr.Add(s.portServer(p.name, l, p.handler)); err != nil {
			_ = l.Close()
			return err
		}
	}

	// The first read; a failure is logged and shown, and the server stays
	// unready until a later read succeeds.
	s.reloader.start()
	defer s.reloader.stop()
	if _, err := s.getCert(&tls.ClientHelloInfo{}); err != nil {
		log.Error(err, "No serving certificate yet")
	}

	// The manager runs until the shutdown delay has passed, not ctx.
	mgrCtx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	defer stopManager()
	done := make(chan error, 1)
	go func() { done <- s.mgr.Start(mgrCtx) }()
	log.Info("Serving admissions", "address", net.JoinHostPort(o.BindAddress, fmt.Sprint(o.Port)), "path", admission.Path,
		"policies", o.PolicyPaths, "tlsMinVersion", tls.VersionName(o.TLSMinVersion), "maxRequestBytes", o.MaxRequestBytes,
		"maxBufferedBytes", o.MaxBufferedBytes, "maxInFlight", o.MaxInFlight)

	stopped := func(err error) error {
		done = nil
		if err == nil {
			return errors.New("the manager stopped unexpectedly")
		}
		return s.certs.Explain(err)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-done:
		runErr = stopped(err)
	}

	s.draining.Store(true)
	if runErr == nil && o.ShutdownDelay > 0 {
		log.Info("Shutting down: not ready and closing keep-alive connections; still answering while endpoints drop this server",
			"delay", o.ShutdownDelay.String())
		select {
		case <-s.after(o.ShutdownDelay):
		case err := <-done:
			runErr = stopped(err)
		}
	}
	if runErr != nil {
		log.Error(runErr, "Shutting down after an error")
	}
	if done != nil {
		log.Info("Closing the webhook listener and draining in-flight requests")
		stopManager()
		if err := <-done; err != nil && runErr == nil {
			runErr = s.certs.Explain(err)
		}
	}
	log.Info("Stopped")
	return runErr
}

// httpErrorLog passes the webhook http.Server's own errors (a failed TLS
// handshake, a head over the limit) to the logger at debug level: under a
// flood of bad connections they would be a line each.
func httpErrorLog(l logr.Logger) *stdlog.Logger {
	return stdlog.New(logWriter{l.WithName("http").V(1)}, "", 0)
}

type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
