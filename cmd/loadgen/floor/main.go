// Command floor is the baseline cmd/loadgen measures the webhook against:
// the least a TLS admission endpoint can do. It uses the webhook's
// certificate and TLS settings (TLS 1.3, HTTP/1.1 only, keep-alive), reads
// each request body whole and answers with a fixed AdmissionReview that
// allows the request, echoing its uid (the first "uid" of the review, the
// request's, found by a byte search). It decodes nothing and imports nothing
// beyond the standard library, so its CPU and memory are the cost of TLS and
// HTTP alone. An API server accepts its answers: the floor of a webhook
// call end to end.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
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
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer(body))
		}),
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
	fmt.Printf("floor server on %s\n", l.Addr())
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

const (
	answerHead = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`
	answerTail = `","allowed":true}}` + "\n"
)

// answer is the fixed answer for the review's uid.
func answer(review []byte) []byte {
	uid := []byte(nil)
	const key = `"uid":"`
	if i := bytes.Index(review, []byte(key)); i >= 0 {
		rest := review[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			uid = rest[:j]
		}
	}
	out := make([]byte, 0, len(answerHead)+len(uid)+len(answerTail))
	out = append(out, answerHead...)
	out = append(out, uid...)
	return append(out, answerTail...)
}
