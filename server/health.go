package server

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
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
		checkShutdown: func(*http.Request) error {
			if s.draining.Load() {
				return errors.New("shutting down")
			}
			return nil
		},
	}
}

func (s *server) healthMux() *http.ServeMux {
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	ready := &healthz.Handler{Checks: s.readyChecks}
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	mux.Handle("/readyz", http.StripPrefix("/readyz", ready))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", ready))
	mux.HandleFunc("/status", s.serveStatus)
	return mux
}

func (s *server) status(r *http.Request) Status {
	st := Status{Ready: true, ShuttingDown: s.draining.Load(), Checks: map[string]string{}}
	names := make([]string, 0, len(s.readyChecks))
	for n := range s.readyChecks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.readyChecks[n](r); err != nil {
			st.Ready = false
			st.Checks[n] = err.Error()
		} else {
			st.Checks[n] = "ok"
		}
	}
	st.Policies, st.LeakMitigation = s.reloader.status()
	st.Certificate.NotAfter = s.metrics.certificateNotAfter()
	return st
}

func (s *server) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := s.status(r)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
}
