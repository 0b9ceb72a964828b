package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
)

// target is a server under load.
type target struct {
	name string
	url  string
	proc *process
	// patched: a correct answer carries a patch.
	patched bool
}

// level is one target at one concurrency.
type level struct {
	target      string
	concurrency int
	latencies   []time.Duration // of the successful measured requests
	errors      int
	firstError  string
	elapsed     time.Duration
	conns       int64 // TLS connections opened, warm-up included
	peakKB      int64 // VmHWM over the level (warm-up included)
	resetOK     bool
	// anonKB and fileKB split the RSS at the end of the level: memory the
	// process allocated, and pages of its binary (and other files) mapped.
	anonKB, fileKB int64
	// cpu is the server's CPU time over the measured phase.
	cpu time.Duration
}

// cpuPerRequest is the server's CPU time per measured request.
func (l *level) cpuPerRequest() time.Duration {
	if len(l.latencies) == 0 {
		return 0
	}
	return l.cpu / time.Duration(len(l.latencies)+l.errors)
}

func (l *level) throughput() float64 {
	if l.elapsed <= 0 {
		return 0
	}
	return float64(len(l.latencies)) / l.elapsed.Seconds()
}

// quantile returns the nearest-rank p-quantile of sorted ds.
func quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted)) + 0.999999)
	return sorted[min(max(i, 1), len(sorted))-1]
}

func newTransport(c int, roots *x509.CertPool, dials *atomic.Int64) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		// HTTP/1.1 keep-alive, one connection per concurrent client, as the
		// API server calls webhooks.
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConns:        c,
		MaxIdleConnsPerHost: c,
		MaxConnsPerHost:     c,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
}

// post sends one review and checks the answer: HTTP 200, the benchmark's
// uid, allowed, and a patch exactly when the target patches.
func post(client *http.Client, t *target, body []byte, buf *bytes.Buffer) error {
	req, err := http.NewRequest(http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	buf.Reset()
	_, err = io.Copy(buf, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	b := buf.Bytes()
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	case !bytes.Contains(b, []byte(`"uid":"`+string(benchdata.UID)+`"`)):
		return fmt.Errorf("answer for another uid: %.200s", b)
	case !bytes.Contains(b, []byte(`"allowed":true`)):
		return fmt.Errorf("not allowed: %.200s", b)
	case bytes.Contains(b, []byte(`"patch":"`)) != t.patched:
		return fmt.Errorf("patch present=%v, want %v: %.200s", !t.patched, t.patched, b)
	}
	return nil
}

// waitAnswers checks once that t answers the review correctly.
func waitAnswers(ctx context.Context, t *target, body []byte, roots *x509.CertPool) error {
	var dials atomic.Int64
	tr := newTransport(1, roots, &dials)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var last error
	for range 100 {
		if last = post(client, t, body, &bytes.Buffer{}); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s does not answer the review correctly: %w", t.name, last)
}

// drive runs c concurrent clients against t: each first sends o.warmup
// unmeasured requests on its connection, then all send measured requests
// until o.requests are done or o.duration has passed.
func drive(ctx context.Context, t *target, c int, body []byte, roots *x509.CertPool, o *options) (*level, error) {
	l := &level{target: t.name, concurrency: c}
	l.resetOK = t.proc.resetPeak() == nil
	var dials atomic.Int64
	tr := newTransport(c, roots, &dials)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var (
		warm     sync.WaitGroup
		begin    = make(chan struct{})
		next     atomic.Int64
		mu       sync.Mutex
		wg       sync.WaitGroup
		deadline time.Time
	)
	warm.Add(c)
	for range c {
		wg.Go(func() {
			var buf bytes.Buffer
			var errs int
			var firstErr string
			record := func(err error) {
				errs++
				if firstErr == "" {
					firstErr = err.Error()
				}
			}
			for range o.warmup {
				if err := post(client, t, body, &buf); err != nil {
					record(fmt.Errorf("warm-up: %w", err))
				}
			}
			warm.Done()
			<-begin
			lat := make([]time.Duration, 0, o.requests/c+1)
			for next.Add(1) <= int64(o.requests) && time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				err := post(client, t, body, &buf)
				d := time.Since(t0)
				if err != nil {
					record(err)
					continue
				}
				lat = append(lat, d)
			}
			mu.Lock()
			l.latencies = append(l.latencies, lat...)
			l.errors += errs
			if l.firstError == "" {
				l.firstError = firstErr
			}
			mu.Unlock()
		})
	}
	warm.Wait()
	cpu0, err := t.proc.cpu()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline = start.Add(o.duration)
	close(begin)
	wg.Wait()
	if l.elapsed, l.cpu, err = t.proc.since(start, cpu0); err != nil {
		return nil, err
	}
	l.conns = dials.Load()
	slices.Sort(l.latencies)
	hwm, err := t.proc.status("VmHWM")
	if err != nil {
		return nil, fmt.Errorf("%s: reading its peak RSS: %w", t.name, err)
	}
	l.peakKB = hwm
	if l.anonKB, err = t.proc.status("RssAnon"); err != nil {
		return nil, err
	}
	if l.fileKB, err = t.proc.status("RssFile"); err != nil {
		return nil, err
	}
	return l, ctx.Err()
}
