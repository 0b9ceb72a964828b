package server

import (
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
)

// serverMetrics are the metrics of the server itself; the admission metrics
// live in admission.Metrics. Both are registered through the server's
// registry.
type serverMetrics struct {
	reloads         *prometheus.CounterVec
	reloadErrors    *prometheus.CounterVec
	lastSuccess     *prometheus.GaugeVec
	lastSuccessTime *prometheus.GaugeVec
	setInfo         *prometheus.GaugeVec
	leakMode        *prometheus.GaugeVec
	certNotAfter    prometheus.Gauge
	budgetRefusals  prometheus.Counter
	connRefusals    *prometheus.CounterVec

	notAfter atomic.Pointer[time.Time]
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
		connRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_connections_refused_total",
			Help: "Connections closed as soon as they were accepted because their port (server: webhook, metrics, health) held as many as it may, in total or from their source address.",
		}, []string{"server"}),
	}
	reg.MustRegister(m.reloads, m.reloadErrors, m.lastSuccess, m.lastSuccessTime, m.setInfo, m.leakMode, m.certNotAfter, m.budgetRefusals, m.connRefusals)
	for _, s := range []string{portWebhook, portMetrics, portHealth} {
		m.connRefusals.WithLabelValues(s)
	}
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

// observeCertificate records the expiry of the certificate being served;
// one whose leaf does not parse is not recorded.
func (m *serverMetrics) observeCertificate(c *tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0]) // nil on error
	}
	if leaf == nil {
		return
	}
	m.notAfter.Store(&leaf.NotAfter)
	m.certNotAfter.Set(float64(leaf.NotAfter.Unix()))
}

func (m *serverMetrics) certificateNotAfter() time.Time {
	return ptr.Deref(m.notAfter.Load(), time.Time{})
}

// registry registers the server's metrics in controller-runtime's registry,
// which the manager's metrics server serves with controller-runtime's own
// (webhook latency, certificate reads) and the Go and process metrics
// (registered by controller-runtime's controller metrics, which the
// certificate rotator links in; TestServe checks they are served), and
// takes them out again when the server stops, so that one process can run
// servers one after the other (the tests do). It is used from one goroutine:
// newServer registers, and Run or newServer's failure unregisters.
type registry struct {
	collectors []prometheus.Collector
}

func (r *registry) Register(c prometheus.Collector) error {
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *registry) Unregister(c prometheus.Collector) bool {
	return ctrlmetrics.Registry.Unregister(c)
}

func (r *registry) unregisterAll() {
	for _, c := range r.collectors {
		ctrlmetrics.Registry.Unregister(c)
	}
	r.collectors = nil
}
