package admission

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// Outcome classifies an admission request for metrics and logs.
type Outcome string

const (
	// OutcomeMutated: the response carries a patch.
	OutcomeMutated Outcome = "mutated"
	// OutcomeUnchanged: the policies ran and had nothing to change.
	OutcomeUnchanged Outcome = "unchanged"
	// OutcomeSkipped: not a pod CREATE, or the core skipped the whole pod
	// (excluded namespace, Windows pod).
	OutcomeSkipped Outcome = "skipped"
	// OutcomeDenied: the request was refused (an ephemeral container, or
	// a container of a new pod, that would mount a hostPath volume
	// writable or in part).
	OutcomeDenied Outcome = "denied"
	// OutcomeError: the request was answered with an error.
	OutcomeError Outcome = "error"
)

// Metrics are the admission metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	hits     *prometheus.CounterVec
	shadow   *prometheus.CounterVec
	// podLevelDropped counts admissions in which a memory.level pod
	// policy injected no headroom because the apiserver drops pod-level
	// resources.
	podLevelDropped *prometheus.CounterVec
	// imageVolumeDropped counts admissions in which an asset that would
	// get its image source was not mounted because the apiserver drops
	// image volumes.
	imageVolumeDropped *prometheus.CounterVec

	// The series of each outcome, looked up once: a lookup hashes the
	// labels. A duration series appears on /metrics only once observed.
	byOutcome map[Outcome]*outcomeSeries
}

type outcomeSeries struct {
	requests prometheus.Counter
	duration atomic.Pointer[prometheus.Observer]
}

// NewMetrics creates the admission metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_admission_requests_total",
			Help: "Admission requests by outcome: mutated, unchanged, skipped (not a pod CREATE, or the pod is excluded), denied (an ephemeral container mounting a hostPath volume writable or in part) or error.",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandbox_webhook_admission_duration_seconds",
			Help:    "Time to answer an admission request, by outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"outcome"}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_policy_hits_total",
			Help: "Pods a policy matched, by policy, effective mode (memory or disk) and enforcement (enforce or shadow).",
		}, []string{"policy", "mode", "enforcement"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_shadow_decisions_total",
			Help: "Items shadow policies would have injected (decision=apply), found already in the pod as they would inject them (decision=present) or skipped (decision=skip); nothing is patched.",
		}, []string{"policy", "decision"}),
		podLevelDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_pod_level_dropped_total",
			Help: "Pods a memory.level pod policy matched but gave no memory headroom, because the apiserver drops pod-level resources (each admission carries a warning); use memory.level auto.",
		}, []string{"policy"}),
		imageVolumeDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_webhook_image_volume_dropped_total",
			Help: "Assets not mounted, by policy, because they would get their image source and the apiserver drops image volumes (each admission carries a warning); use a privileged namespace with hostPath, or enable the ImageVolume gate.",
		}, []string{"policy"}),
	}
	reg.MustRegister(m.requests, m.duration, m.hits, m.shadow, m.podLevelDropped, m.imageVolumeDropped)
	m.byOutcome = map[Outcome]*outcomeSeries{}
	for _, o := range []Outcome{OutcomeMutated, OutcomeUnchanged, OutcomeSkipped, OutcomeDenied, OutcomeError} {
		m.byOutcome[o] = &outcomeSeries{requests: m.requests.WithLabelValues(string(o))}
	}
	return m
}

// ObserveRequest counts one answered request and its latency. The server
// also calls it for requests it rejects before the handler (body too large).
func (m *Metrics) ObserveRequest(o Outcome, d time.Duration) {
	if s, ok := m.byOutcome[o]; ok {
		s.requests.Inc()
		obs := s.duration.Load()
		if obs == nil {
			o := m.duration.WithLabelValues(string(o))
			s.duration.Store(&o)
			obs = &o
		}
		(*obs).Observe(d.Seconds())
		return
	}
	m.requests.WithLabelValues(string(o)).Inc()
	m.duration.WithLabelValues(string(o)).Observe(d.Seconds())
}

func (m *Metrics) observeResult(res mutate.Result) {
	for _, p := range res.Policies {
		if p.Matched {
			m.hits.WithLabelValues(p.Policy, string(p.Mode), string(p.Enforcement)).Inc()
		}
	}
	for _, d := range res.Applied {
		switch {
		case d.Shadow && d.Present:
			m.shadow.WithLabelValues(d.Policy, "present").Inc()
		case d.Shadow:
			m.shadow.WithLabelValues(d.Policy, "apply").Inc()
		}
	}
	for _, d := range res.Skipped {
		if d.Shadow {
			m.shadow.WithLabelValues(d.Policy, "skip").Inc()
		} else if d.Reason == mutate.PodLevelDroppedReason {
			m.podLevelDropped.WithLabelValues(d.Policy).Inc()
		} else if d.Reason == mutate.ImageVolumeDroppedReason {
			m.imageVolumeDropped.WithLabelValues(d.Policy).Inc()
		}
	}
}
