// Package floorserver runs the load baselines hack/bench/loadgen measures the webhook
// against: a TLS server with the webhook's certificate and TLS settings
// (TLS 1.3, HTTP/1.1 only, keep-alive) in front of a given handler. It uses
// the standard library alone, so a floor that adds nothing else measures the
// cost of TLS and HTTP alone.
package floorserver

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
)

// Main parses --cert-dir and --address, and any flags the caller defined on
// fs (nil: none), builds the handler with newHandler once they are parsed,
// serves it until SIGINT or SIGTERM, and exits the process with 1 on an
// error. name prefixes messages.
func Main(name string, fs *flag.FlagSet, newHandler func() (http.Handler, error)) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if fs == nil {
		fs = flag.NewFlagSet(name, flag.ContinueOnError)
	}
	err := run(ctx, name, fs, os.Args[1:], newHandler)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, name string, fs *flag.FlagSet, args []string, newHandler func() (http.Handler, error)) error {
	certDir := fs.String("cert-dir", "", "directory with tls.crt and tls.key")
	addr := fs.String("address", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	handler, err := newHandler()
	if err != nil {
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
	srv := &http.Server{
		Handler: handler,
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
	fmt.Printf("%s server on %s\n", name, l.Addr())
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
