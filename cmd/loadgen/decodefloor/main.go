// Command decodefloor is the second baseline cmd/loadgen measures the
// webhook against: a controller-runtime admission webhook that decodes each
// AdmissionReview and answers "allowed", doing nothing else (the floor of
// admission's BenchmarkReview, served). Same certificate and TLS settings
// as the webhook: TLS 1.3, HTTP/1.1 only, keep-alive.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "decodefloor: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("decodefloor", flag.ContinueOnError)
	certDir := fs.String("cert-dir", "", "directory with tls.crt and tls.key")
	addr := fs.String("address", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hook := &cradmission.Webhook{
		Handler: cradmission.HandlerFunc(func(context.Context, cradmission.Request) cradmission.Response {
			return cradmission.Allowed("")
		}),
		LogConstructor: func(logr.Logger, *cradmission.Request) logr.Logger { return logr.Discard() },
	}
	srv := &http.Server{
		Handler: hook,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			NextProtos:   []string{"http/1.1"},
			Certificates: []tls.Certificate{cert},
		},
		ReadHeaderTimeout: 32 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("decode floor on %s\n", l.Addr())
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
