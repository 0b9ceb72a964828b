package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sandbox-webhook/sandbox-webhook/admission"
)

// serverMetrics are the metrics of the server itself; the admission metrics
// live in admission.Metrics. Both are registered in a registry private to one
// server, served together with controller-runtime's own registry (webhook
// latency, certificate reads) on /metrics.
type serverMetrics struct {
	reloads         *prometheus.CounterVec
	reloadErrors    *prometheus.CounterVec
	lastSuccess     *prometheus.GaugeVec
	lastSuccessTime *prometheus.GaugeVec
	setInfo         *prometheus.GaugeVec
	leakMode        *prometheus.GaugeVec
	certNotAfter    prometheus.Gauge
	budgetRefusals  prometheus.Counter

	mu       sync.Mutex
	notAfter time.Time
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	m := &serverMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_policy_reloads_total",
			Help: "Successful reads of the policy files (source=policies) or the leak-mitigation file (source=leak-mitigation), the first included.",
		}, []string{"source"}),
		reloadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_policy_reload_errors_total",
			Help: "Reads of the policy files or the leak-mitigation file that were rejected; the last good configuration kept serving.",
		}, []string{"source"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sandbox_webhook_policy_reload_last_success",
			Help: "1 when the last read of the source succeeded, 0 when it was rejected (see /status on the health port for the errors).",
		}, []string{"source"}),
		lastSuccessTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sandbox_webhook_policy_reload_last_success_timestamp_seconds",
			Help: "Unix time of the last successful read of the source.",
		}, []string{"source"}),
		setInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sandbox_webhook_policy_set_info",
			Help: "The policy set serving admissions, by its content hash (value always 1).",
		}, []string{"hash"}),
		leakMode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sandbox_webhook_leak_mitigation_info",
			Help: "The leak-mitigation override serving admissions: on, off or policy (value always 1).",
		}, []string{"mode"}),
		certNotAfter: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_webhook_certificate_not_after_timestamp_seconds",
			Help: "Unix time at which the serving certificate expires.",
		}),
		budgetRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sandbox_webhook_busy_refusals_total",
			Help: "Requests answered HTTP 503 because --max-buffered-bytes or --max-in-flight left no room for them.",
		}),
	}
	reg.MustRegister(m.reloads, m.reloadErrors, m.lastSuccess, m.lastSuccessTime, m.setInfo, m.leakMode, m.certNotAfter, m.budgetRefusals)
	for _, s := range []string{sourcePolicies, sourceLeakMitigation} {
		m.reloads.WithLabelValues(s)
		m.reloadErrors.WithLabelValues(s)
	}
	return m
}

func (m *serverMetrics) reloaded(source string, err error) {
	if err != nil {
		m.reloadErrors.WithLabelValues(source).Inc()
		m.lastSuccess.WithLabelValues(source).Set(0)
		return
	}
	m.reloads.WithLabelValues(source).Inc()
	m.lastSuccess.WithLabelValues(source).Set(1)
	m.lastSuccessTime.WithLabelValues(source).SetToCurrentTime()
}

func (m *serverMetrics) setConfig(cfg *admission.Config) {
	m.setInfo.Reset()
	m.setInfo.WithLabelValues(cfg.Policies.Hash).Set(1)
	m.leakMode.Reset()
	m.leakMode.WithLabelValues(string(cfg.Options.LeakMitigation)).Set(1)
}

// observeCertificate records the expiry of the certificate being served.
func (m *serverMetrics) observeCertificate(c *tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return
		}
	}
	if leaf == nil {
		return
	}
	m.mu.Lock()
	m.notAfter = leaf.NotAfter
	m.mu.Unlock()
	m.certNotAfter.Set(float64(leaf.NotAfter.Unix()))
}

func (m *serverMetrics) certificateNotAfter() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.notAfter
}

// metricsHandler serves reg together with controller-runtime's registry.
// Go and process metrics are added to reg unless controller-runtime's
// registry already has them.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	if !gathers(ctrlmetrics.Registry, "go_goroutines") {
		reg.MustRegister(collectors.NewGoCollector())
	}
	if !gathers(ctrlmetrics.Registry, "process_start_time_seconds") {
		reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return promhttp.HandlerFor(prometheus.Gatherers{reg, ctrlmetrics.Registry}, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	})
}

func gathers(g prometheus.Gatherer, name string) bool {
	mfs, err := g.Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return true
		}
	}
	return false
}
