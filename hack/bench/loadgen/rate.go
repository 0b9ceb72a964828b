package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ceilingP99 is the latency one replica must keep at p99 for a rate to
// count as held (the chart's sizing advice, docs/cluster.md).
const ceilingP99 = 100 * time.Millisecond

// rateLevel is the webhook at one offered rate.
type rateLevel struct {
	rate       int
	sent       int
	latencies  []time.Duration // from each request's scheduled start
	errors     int
	firstError string
	elapsed    time.Duration
	cpu        time.Duration
	conns      int64
}

func (l *rateLevel) held() bool {
	return l.errors == 0 && len(l.latencies) > 0 && quantile(l.latencies, .99) < ceilingP99
}

// offer sends reviews to t at rate per second, open loop (a request is sent
// on schedule whether or not earlier ones were answered, as API servers
// creating pods do), for o.duration, over up to 512 keep-alive connections.
// Latency is measured from each request's scheduled time, so a server that
// falls behind is charged for the queue it builds.
func offer(ctx context.Context, t *target, rate int, body []byte, roots *x509.CertPool, o *options) (*rateLevel, error) {
	l := &rateLevel{rate: rate}
	var dials atomic.Int64
	tr := newTransport(512, roots, &dials)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// Warm up: as many connections as a tenth of a second at this rate.
	var warm sync.WaitGroup
	for range max(1, rate/10) {
		warm.Go(func() { _ = post(client, t, body, &bytes.Buffer{}) })
	}
	warm.Wait()

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	cpu0, err := t.proc.cpu()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	n := int(o.duration.Seconds() * float64(rate))
	every := time.Second / time.Duration(rate)
	for i := range n {
		at := start.Add(time.Duration(i) * every)
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
		}
		wg.Go(func() {
			var buf bytes.Buffer
			err := post(client, t, body, &buf)
			d := time.Since(at)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				l.errors++
				if l.firstError == "" {
					l.firstError = err.Error()
				}
				return
			}
			l.latencies = append(l.latencies, d)
		})
		l.sent++
	}
	wg.Wait()
	if l.elapsed, l.cpu, err = t.proc.since(start, cpu0); err != nil {
		return nil, err
	}
	l.conns = dials.Load()
	slices.Sort(l.latencies)
	return l, nil
}

// writeRates prints the open-loop levels and the highest rate held.
func writeRates(w io.Writer, o *options, levels []*rateLevel) {
	fmt.Fprintf(w, "\n## One replica's ceiling (hack/bench/loadgen --rates)\n\n")
	pin := "not pinned"
	if o.serverCPUs != "" {
		pin = "pinned to CPU " + o.serverCPUs + " (taskset), so GOMAXPROCS follows"
	}
	fmt.Fprintf(w, "The webhook alone (%s), reviews sent open loop at each rate for %s over keep-alive TLS connections, "+
		"latency from each request's scheduled time. A rate is held when p99 < %s with no error. %s.\n\n", pin, o.duration, ceilingP99, machine())
	fmt.Fprintf(w, "| offered req/s | sent | answered req/s | errors | p50 | p99 | max | CPU / request | server CPU (cores) | connections | held |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	ceiling := 0
	for _, l := range levels {
		perReq := time.Duration(0)
		if l.sent > 0 {
			perReq = l.cpu / time.Duration(l.sent)
		}
		held := "no"
		if l.held() {
			held = "yes"
			ceiling = max(ceiling, l.rate)
		}
		fmt.Fprintf(w, "| %d | %d | %.0f | %d | %s | %s | %s | %.0f µs | %.2f | %d | %s |\n", l.rate, l.sent,
			float64(len(l.latencies))/l.elapsed.Seconds(), l.errors, ms(quantile(l.latencies, .5)), ms(quantile(l.latencies, .99)),
			ms(quantile(l.latencies, 1)), float64(perReq)/float64(time.Microsecond), l.cpu.Seconds()/l.elapsed.Seconds(), l.conns, held)
	}
	for _, l := range levels {
		if l.firstError != "" {
			fmt.Fprintf(w, "\nat %d req/s, first error: %s\n", l.rate, l.firstError)
		}
	}
	fmt.Fprintf(w, "\nHighest rate held: **%d req/s**.\n", ceiling)
}
