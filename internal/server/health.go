package server

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// Status is what /status on the health port shows: readiness with the
// reason of every failing check, the policy set serving admissions, the
// leak-mitigation mode and where it comes from, and the errors of the last
// rejected reload (readiness stays true while the last good set serves).
type Status struct {
	Ready          bool                 `json:"ready"`
	ShuttingDown   bool                 `json:"shuttingDown"`
	Checks         map[string]string    `json:"checks"`
	Policies       PolicyStatus         `json:"policies"`
	LeakMitigation LeakMitigationStatus `json:"leakMitigation"`
	Certificate    CertificateStatus    `json:"certificate"`
	Cluster        ClusterStatus        `json:"cluster"`
}

// ReloadStatus describes one reloadable source.
type ReloadStatus struct {
	Paths  []string `json:"paths"`
	Loaded bool     `json:"loaded"`
	// LastSuccess is the last time the source was read and accepted.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// Errors are the problems of the latest read when it was rejected;
	// empty once a read succeeds again.
	Errors        []string  `json:"errors,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
}

// PolicyStatus is the policy set serving admissions.
type PolicyStatus struct {
	ReloadStatus
	Hash     string       `json:"hash,omitempty"`
	Policies []PolicyInfo `json:"policies,omitempty"`
}

// PolicyInfo is one serving policy.
type PolicyInfo struct {
	Name        string `json:"name"`
	Hash        string `json:"hash"`
	Source      string `json:"source"`
	Enforcement string `json:"enforcement"`
	Mode        string `json:"mode"`
}

// LeakMitigationStatus is the mode override serving admissions.
type LeakMitigationStatus struct {
	Mode string `json:"mode"`
	// From is --leak-mitigation or --leak-mitigation-file.
	From string        `json:"from"`
	File *ReloadStatus `json:"file,omitempty"`
}

// CertificateStatus is the serving certificate.
type CertificateStatus struct {
	NotAfter time.Time `json:"notAfter,omitzero"`
}

// Names of the server's own readiness checks.
const (
	checkWebhookServer  = "webhook-server"
	checkCertificate    = "certificate"
	checkPolicies       = "policies"
	checkNamespaceCache = "namespace-cache"
	checkShutdown       = "shutdown"
	checkCluster        = "cluster-probe"
)

func (s *server) ownReadyChecks() map[string]healthz.Checker {
	return map[string]healthz.Checker{
		checkWebhookServer: s.webhook.StartedChecker(),
		checkCertificate: func(*http.Request) error {
			c, err := s.getCert(&tls.ClientHelloInfo{})
			if err != nil {
				return err
			}
			if c == nil {
				return errors.New("no serving certificate is loaded")
			}
			return nil
		},
		checkPolicies:       func(*http.Request) error { return s.reloader.ready() },
		checkNamespaceCache: func(*http.Request) error { return s.namespaces.synced() },
		checkCluster:        func(*http.Request) error { return s.cluster.ready() },
		checkShutdown: func(*http.Request) error {
			if s.draining.Load() {
				return errors.New("shutting down")
			}
			return nil
		},
	}
}

// The ports, for logs and the connections-refused metric.
const (
	portWebhook = "webhook"
	portMetrics = "metrics"
	portHealth  = "health"
)

// healthHandler serves the health port: /healthz, /readyz (with the
// cluster notices of ?verbose) and /status.
func (s *server) healthHandler() http.Handler {
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	ready := &healthz.Handler{Checks: s.readyChecks}
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	readyz := s.withClusterNotice(http.StripPrefix("/readyz", ready))
	mux.Handle("/readyz", readyz)
	mux.Handle("/readyz/", readyz)
	mux.HandleFunc("/status", s.serveStatus)
	return mux
}

// metricsHandler serves the metrics port: /metrics, what the manager's
// metrics server would serve.
func (s *server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	return mux
}

// portServer is the metrics or the health port, run by the manager with its
// other HTTP servers (started first, stopped last), with the webhook port's
// limits on request heads and a cap on connections (probeConnLimits).
func (s *server) portServer(name string, l net.Listener, h http.Handler) *manager.Server {
	limited := newLimitListener(l, probeConnLimits, s.metrics.connRefusals.WithLabelValues(name))
	srv := httpServer(limited, h, httpErrorLog(s.log.WithName(name)), 90*time.Second)
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 30*time.Second
	return &manager.Server{
		Name:     name,
		Listener: limited,
		Server:   srv,
	}
}

func (s *server) status(r *http.Request) Status {
	st := Status{Ready: true, ShuttingDown: s.draining.Load(), Checks: map[string]string{}}
	for _, n := range slices.Sorted(maps.Keys(s.readyChecks)) {
		if err := s.readyChecks[n](r); err != nil {
			st.Ready = false
			st.Checks[n] = err.Error()
		} else {
			st.Checks[n] = "ok"
		}
	}
	st.Policies, st.LeakMitigation = s.reloader.status()
	st.Certificate.NotAfter = s.metrics.certificateNotAfter()
	st.Cluster = s.clusterStatus()
	return st
}

func (s *server) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := s.status(r)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
}

func (s *server) clusterStatus() ClusterStatus {
	st := s.cluster.get()
	st.Affected, st.ImageVolumeAffected = s.reloader.affected(
		st.PodLevelResources == string(mutate.PodLevelDropped),
		st.ImageVolumes == string(mutate.ImageVolumesDropped))
	return st
}

// clusterNotice is the lines /readyz?verbose adds while the apiserver drops
// pod-level resources or image volumes and a serving policy asks for them.
// They do not make the server unready: admissions go on, each affected one
// with a warning.
func (s *server) clusterNotice() string {
	st := s.clusterStatus()
	var b strings.Builder
	if len(st.Affected) > 0 {
		fmt.Fprintf(&b, "[!]pod-level-resources: the apiserver (%s) drops pod-level resources; policies with memory.level pod inject no memory headroom: %s\n",
			st.Version, strings.Join(st.Affected, ", "))
	}
	if len(st.ImageVolumeAffected) > 0 {
		fmt.Fprintf(&b, "[!]image-volumes: the apiserver (%s) drops image volumes; policies whose assets get their image source mount nothing there: %s\n",
			st.Version, strings.Join(st.ImageVolumeAffected, ", "))
	}
	return b.String()
}

// withClusterNotice adds clusterNotice to a verbose /readyz answer, before
// its last line.
func (s *server) withClusterNotice(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var notice string
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			notice = s.clusterNotice()
		}
		if notice == "" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.String()
		i := strings.LastIndex(strings.TrimSuffix(body, "\n"), "\n") + 1
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = io.WriteString(w, body[:i]+notice+body[i:])
	})
}
