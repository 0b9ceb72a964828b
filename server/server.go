// Package server is `sandbox-webhook serve`: controller-runtime's webhook
// server with the admission handler at /mutate-v1-pod, hot-reloaded policy
// files, a namespace cache, health and status endpoints, Prometheus metrics
// and a graceful shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandbox-webhook/sandbox-webhook/admission"
)

// Run serves admissions until ctx ends, then shuts down gracefully: it turns
// not ready and answers with "Connection: close" at once, keeps answering for
// ShutdownDelay, then closes the listener, waits for in-flight reviews to be
// answered (controller-runtime's server gives them up to a minute) and
// closes the remaining connections.
func Run(ctx context.Context, o Options) error {
	if err := o.complete(); err != nil {
		return err
	}
	s, err := newServer(&o)
	if err != nil {
		return err
	}
	return s.run(ctx)
}

type server struct {
	opts       *Options
	log        logr.Logger
	registry   *prometheus.Registry
	metrics    *serverMetrics
	admission  *admission.Metrics
	config     atomic.Pointer[admission.Config]
	reloader   *reloader
	namespaces *namespaceCache
	cluster    *clusterProbe
	// lookup is what the handler reads namespaces through.
	lookup      admission.NamespaceLookup
	getCert     func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	webhook     webhook.Server
	readyChecks map[string]healthz.Checker
	runnables   map[string]Runnable
	draining    atomic.Bool
	// budget bounds the request bodies held at once.
	budget *requestBudget
	// after is time.After; tests end the shutdown delay themselves.
	after func(time.Duration) <-chan time.Time
}

func newServer(o *Options) (*server, error) {
	s := &server{
		opts:      o,
		log:       o.Logger,
		registry:  prometheus.NewRegistry(),
		runnables: map[string]Runnable{},
		after:     time.After,
		budget:    newRequestBudget(o.MaxBufferedBytes, o.MaxInFlight),
	}
	s.metrics = newServerMetrics(s.registry)
	s.admission = admission.NewMetrics(s.registry)
	s.reloader = newReloader(o, &s.config, s.metrics)

	client := o.KubeClient
	if client == nil {
		var err error
		if client, err = kubernetes.NewForConfig(o.RESTConfig); err != nil {
			return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
		}
	}
	s.namespaces = newNamespaceCache(client)
	s.cluster = &clusterProbe{
		log:      o.Logger.WithName("cluster"),
		client:   client,
		interval: o.ClusterProbeInterval,
		publish:  s.reloader.setPodLevel,
		status:   ClusterStatus{PodLevelResources: "unknown"},
	}
	s.lookup = s.namespaces.Lookup

	getCert := o.GetCertificate
	if getCert == nil {
		// The same watcher controller-runtime would start from CertDir,
		// owned here so that readiness and the not-after metric see the
		// certificate actually served.
		cw, err := certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("loading the serving certificate from --cert-dir %s: %w", o.CertDir, err)
		}
		cw.RegisterCallback(func(c tls.Certificate) { s.metrics.observeCertificate(&c) })
		getCert = cw.GetCertificate
		s.runnables["certwatcher"] = cw.Start
	}
	s.getCert = s.recordCertificate(getCert)

	s.runnables["policy-reloader"] = s.reloader.run
	s.runnables["namespace-cache"] = s.namespaces.run
	s.runnables["cluster-probe"] = s.cluster.run
	for name, r := range o.Runnables {
		if _, dup := s.runnables[name]; dup {
			return nil, fmt.Errorf("runnable %q is already defined by the server", name)
		}
		s.runnables[name] = r
	}
	return s, nil
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

	s.webhook = newWebhookServer(webhook.Options{
		Host:    o.BindAddress,
		Port:    o.Port,
		TLSOpts: append([]func(*tls.Config){s.tlsConfig}, o.TLSOpts...),
	}, httpErrorLog(log))
	handler := admission.NewHandler(&s.config, s.lookup, s.admission)
	s.webhook.Register(admission.Path, s.guard(handler.Review(log)))

	s.readyChecks = s.ownReadyChecks()
	for name, c := range o.ReadyChecks {
		if _, dup := s.readyChecks[name]; dup {
			return fmt.Errorf("readiness check %q is already defined by the server", name)
		}
		s.readyChecks[name] = c
	}

	// The first read; a failure is logged and shown, and the server stays
	// unready until a later read succeeds.
	s.reloader.start()
	if _, err := s.getCert(&tls.ClientHelloInfo{}); err != nil {
		log.Error(err, "No serving certificate yet")
	}

	// Listen on the side ports first so that a clash fails at once.
	var sides []*http.Server
	var listeners []net.Listener
	for _, side := range []struct {
		name, addr string
		handler    http.Handler
	}{
		{"health probes", o.HealthProbeBindAddress, s.healthMux()},
		{"metrics", o.MetricsBindAddress, metricsMux(s.registry)},
	} {
		if side.addr == "0" || side.addr == "" {
			continue
		}
		l, err := net.Listen("tcp", side.addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			s.reloader.stop()
			return fmt.Errorf("listening for %s on %s: %w", side.name, side.addr, err)
		}
		log.Info("Listening", "for", side.name, "address", l.Addr().String())
		listeners = append(listeners, l)
		sides = append(sides, &http.Server{
			Handler:           side.handler,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       90 * time.Second,
		})
	}

	// Everything but the webhook listener runs under bg, which ends only
	// after the webhook server drained.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	errc := make(chan error, len(s.runnables)+len(sides))
	var wg sync.WaitGroup
	for name, r := range s.runnables {
		wg.Go(func() {
			if err := r(bg); err != nil && bg.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	for i, srv := range sides {
		wg.Go(func() {
			if err := srv.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
	}

	whCtx, stopWebhook := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWebhook()
	whDone := make(chan error, 1)
	go func() { whDone <- s.webhook.Start(whCtx) }()
	log.Info("Serving admissions", "address", net.JoinHostPort(o.BindAddress, fmt.Sprint(o.Port)), "path", admission.Path,
		"policies", o.PolicyPaths, "tlsMinVersion", tls.VersionName(o.TLSMinVersion), "maxRequestBytes", o.MaxRequestBytes,
		"maxBufferedBytes", o.MaxBufferedBytes, "maxInFlight", o.MaxInFlight)

	webhookStopped := func(err error) error {
		whDone = nil
		if err == nil {
			return errors.New("the webhook server stopped unexpectedly")
		}
		return fmt.Errorf("webhook server: %w", err)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	case err := <-whDone:
		runErr = webhookStopped(err)
	}

	s.draining.Store(true)
	if runErr == nil && o.ShutdownDelay > 0 {
		log.Info("Shutting down: not ready and closing keep-alive connections; still answering while endpoints drop this server",
			"delay", o.ShutdownDelay.String())
		select {
		case <-s.after(o.ShutdownDelay):
		case runErr = <-errc:
		case err := <-whDone:
			runErr = webhookStopped(err)
		}
	}
	if runErr != nil {
		log.Error(runErr, "Shutting down after an error")
	}
	log.Info("Closing the webhook listener and draining in-flight requests")
	stopWebhook()
	if whDone != nil {
		if err := <-whDone; err != nil && runErr == nil {
			runErr = fmt.Errorf("webhook server: %w", err)
		}
	}
	stopBG()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range sides {
		_ = srv.Shutdown(shutdownCtx)
	}
	wg.Wait()
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

func metricsMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(reg))
	return mux
}
