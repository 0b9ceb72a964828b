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
	"sync"
	"time"

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
// graceful shutdown that waits up to drainTimeout for requests in flight. It
// is the manager's WebhookServer.
type webhookServer struct {
	*webhook.DefaultServer
	// errorLog receives the http.Server's own errors (failed handshakes,
	// oversized heads): one line per bad connection.
	errorLog *log.Logger

	mu      sync.Mutex
	started bool
}

var _ webhook.Server = (*webhookServer)(nil)

func newWebhookServer(o webhook.Options, errorLog *log.Logger) *webhookServer {
	return &webhookServer{DefaultServer: webhook.NewServer(o).(*webhook.DefaultServer), errorLog: errorLog}
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
	l, err := tls.Listen("tcp", s.addr(), cfg)
	if err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           mux,
		ErrorLog:          s.errorLog,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       90 * time.Second, // the keep-alive timeout of Go's http.DefaultTransport
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started {
			return errors.New("webhook server has not been started yet")
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.addr(), cfg)
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
