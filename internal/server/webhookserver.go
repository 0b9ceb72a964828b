package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// maxHeaderBytes bounds a request's head (Go adds 4 KiB of slack). The API
// server's is a few hundred bytes: method, path, Content-Type, Accept,
// Content-Length, User-Agent and perhaps a trace header.
const maxHeaderBytes = 16 << 10

// readHeaderTimeout bounds the TLS handshake and the request head: the API
// server sends both at once.
const readHeaderTimeout = 10 * time.Second

// webhookServer is controller-runtime's webhook.DefaultServer (whose
// Register instruments every hook with controller-runtime's webhook metrics)
// started with the HTTP limits it does not let one set: its http.Server takes
// 1 MiB of headers per connection and 32 s to send them, so a few hundred
// connections pin hundreds of MiB. The rest is the same: TLS from TLSOpts
// (GetCertificate is required), the started check, and on ctx's end a
// graceful shutdown that waits up to drainTimeout for requests in flight,
// after an idle drain of its own (see Start). It is the manager's
// WebhookServer.
type webhookServer struct {
	*webhook.DefaultServer
	// errorLog receives the http.Server's own errors (failed handshakes,
	// oversized heads): one line per bad connection.
	errorLog *log.Logger

	// idleDrain is how long, after ctx ends and the listener closes, the
	// server leaves clients to close their keep-alive connections before it
	// closes the ones still idle (Options.IdleDrain).
	idleDrain time.Duration
	// limits cap the connections open at once; refused counts those
	// closed beyond them.
	limits  connLimits
	refused prometheus.Counter

	started atomic.Bool
}

func newWebhookServer(o webhook.Options, errorLog *log.Logger, idleDrain time.Duration) *webhookServer {
	return &webhookServer{DefaultServer: webhook.NewServer(o).(*webhook.DefaultServer), errorLog: errorLog, idleDrain: idleDrain}
}

func (s *webhookServer) addr() string {
	return net.JoinHostPort(s.Options.Host, strconv.Itoa(s.Options.Port))
}

// Start serves until ctx ends, then shuts down gracefully.
func (s *webhookServer) Start(ctx context.Context) error {
	mux := s.WebhookMux()
	if mux == nil {
		return errors.New("no webhook registered")
	}
	cfg := &tls.Config{}
	for _, op := range s.Options.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		return errors.New("the webhook server has no GetCertificate")
	}
	tcp, err := net.Listen("tcp", s.addr())
	if err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	limited := newLimitListener(tcp, s.limits, s.refused)
	l := tls.NewListener(limited, cfg)
	// Requests answered while the server drains keep their context: the
	// end of ctx stops accepting, not the reviews already taken on.
	base := context.WithoutCancel(ctx)
	// Longer than the API server's keep-alive timeout (90 s, Go's
	// http.DefaultTransport's): the client closes an idle connection
	// first, so a request never meets one this server closed.
	srv := httpServer(limited, mux, s.errorLog, 120*time.Second)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	// The connections open, for the idle drain.
	var open atomic.Int64
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		limited.ConnState(c, st)
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		<-ctx.Done()
		// Stop accepting, then leave the clients idleDrain to close their
		// keep-alive connections: the API server calls webhooks over
		// HTTP/1.1, where a server closing an idle connection races with
		// the client sending a request on it, and the API server does not
		// retry an admission POST that meets the closed connection (EOF,
		// broken pipe). A connection the client uses meanwhile gets
		// "Connection: close" (gate); an idle one the API server closes
		// itself after 90 s. What is left after idleDrain is closed.
		_ = l.Close()
		deadline := time.Now().Add(s.idleDrain)
		for open.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.started.Store(true)
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	<-closed
	return nil
}

// StartedChecker passes once the server started and its port completes a
// TLS handshake.
func (s *webhookServer) StartedChecker() healthz.Checker {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // only checks that the listener answers TLS
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.addr(), cfg)
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
