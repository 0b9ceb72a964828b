package certs

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names; alerts key on them.
const (
	metricNotAfter = "sandbox_webhook_cert_manager_certificate_not_after_timestamp_seconds"
	metricReady    = "sandbox_webhook_cert_manager_certificate_ready"
)

// metrics are the gauges of cert-manager mode: what cert-manager says about the
// Certificate. The certificate actually served is measured by serve itself
// (sandbox_webhook_certificate_not_after_timestamp_seconds) in every mode.
type metrics struct {
	notAfter prometheus.Gauge
	ready    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	notAfter, err := registerGauge(reg, metricNotAfter,
		"status.notAfter (Unix seconds) of the cert-manager Certificate that issues the webhook's serving certificate; 0 while unknown.")
	if err != nil {
		return nil, err
	}
	ready, err := registerGauge(reg, metricReady,
		"1 while the cert-manager Certificate that issues the webhook's serving certificate has condition Ready=True, else 0.")
	if err != nil {
		return nil, err
	}
	return &metrics{notAfter: notAfter, ready: ready}, nil
}

// registerGauge registers a gauge, reusing one that is already registered under
// the same name and help (Setup runs more than once in one process in tests).
func registerGauge(reg prometheus.Registerer, name, help string) (prometheus.Gauge, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(prometheus.Gauge); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("registering metric %s: %w", name, err)
	}
	return g, nil
}

func (m *metrics) setNotAfter(t time.Time) {
	if t.IsZero() {
		m.notAfter.Set(0)
		return
	}
	m.notAfter.Set(float64(t.Unix()))
}

func (m *metrics) setReady(ready bool) {
	if ready {
		m.ready.Set(1)
	} else {
		m.ready.Set(0)
	}
}
