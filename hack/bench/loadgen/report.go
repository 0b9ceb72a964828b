package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

type peakOf struct {
	target string
	kb     int64
}

type report struct {
	opts         *options
	reviewBytes  int
	started      time.Time
	startups     []startup
	levels       []*level
	lifetimePeak []peakOf
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func mib(kb int64) string       { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// write prints the report in markdown: ratios first, then the raw numbers.
func (r *report) write(w io.Writer) {
	o := r.opts
	fmt.Fprintf(w, "## Server under load (hack/bench/loadgen)\n\n")
	fmt.Fprintf(w, "`sandbox-webhook serve` and two floors, each its own process with the same certificate and TLS settings, "+
		"driven in turn by the same client over keep-alive HTTP/1.1 TLS connections (one per concurrent client) on loopback: "+
		"*floor* reads the review and answers a fixed one (TLS and HTTP only, hack/bench/loadgen/floor); "+
		"*decode-floor* is a controller-runtime webhook that decodes the review and answers allowed (hack/bench/loadgen/decodefloor). "+
		"Review: the %s pod (%d bytes), %d polic%s loaded. "+
		"Per target and level: %d warm-up requests per connection, then at most %d requests or %s. %s; %s.\n\n",
		o.pod, r.reviewBytes, o.policies, plural(o.policies, "y", "ies"), o.warmup, o.requests, o.duration, machine(), r.started.Format(time.RFC3339))

	byKey := map[string]*level{}
	for _, l := range r.levels {
		byKey[fmt.Sprintf("%s/%d", l.target, l.concurrency)] = l
	}
	fmt.Fprintf(w, "*CPU / request* is the server process's own CPU time (user and system, /proc/PID/stat) over the measured phase "+
		"divided by its requests: unlike the rates, it does not depend on what else the machine runs.\n\n")
	fmt.Fprintf(w, "| concurrency | throughput / floor | p99 / floor | CPU per request / floor | throughput / decode-floor | p99 / decode-floor | CPU per request / decode-floor | webhook peak RSS | webhook RSS at the end: anon + file | errors (webhook, floors) |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range o.concurrency {
		wl, fl, dl := byKey[fmt.Sprintf("webhook/%d", c)], byKey[fmt.Sprintf("floor/%d", c)], byKey[fmt.Sprintf("decode-floor/%d", c)]
		if wl == nil || fl == nil || dl == nil {
			continue
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s + %s | %d, %d |\n", c,
			ratio(wl.throughput(), fl.throughput()),
			ratio(float64(quantile(wl.latencies, .99)), float64(quantile(fl.latencies, .99))),
			ratio(float64(wl.cpuPerRequest()), float64(fl.cpuPerRequest())),
			ratio(wl.throughput(), dl.throughput()),
			ratio(float64(quantile(wl.latencies, .99)), float64(quantile(dl.latencies, .99))),
			ratio(float64(wl.cpuPerRequest()), float64(dl.cpuPerRequest())),
			mib(wl.peakKB), mib(wl.anonKB), mib(wl.fileKB), wl.errors, fl.errors+dl.errors)
	}

	fmt.Fprintf(w, "\n| target | concurrency | requests | errors | req/s | p50 | p90 | p99 | max | CPU / request | connections | peak RSS | RSS at the end: anon + file |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range r.levels {
		rss := mib(l.peakKB)
		if !l.resetOK {
			rss += " (process lifetime)"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.0f | %s | %s | %s | %s | %.0f µs | %d | %s | %s + %s |\n", l.target, l.concurrency,
			len(l.latencies), l.errors, l.throughput(), ms(quantile(l.latencies, .5)), ms(quantile(l.latencies, .9)),
			ms(quantile(l.latencies, .99)), ms(quantile(l.latencies, 1)), float64(l.cpuPerRequest())/float64(time.Microsecond),
			l.conns, rss, mib(l.anonKB), mib(l.fileKB))
	}
	for _, l := range r.levels {
		if l.firstError != "" {
			fmt.Fprintf(w, "\n%s at concurrency %d, first error: %s\n", l.target, l.concurrency, l.firstError)
		}
	}
	for _, p := range r.lifetimePeak {
		if p.kb > 0 {
			fmt.Fprintf(w, "\n%s peak RSS from its start through the first level: %s", p.target, mib(p.kb))
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "\n## Start-up (hack/bench/loadgen)\n\n")
	fmt.Fprintf(w, "From just before the process starts to the first 200 from `/readyz` (polled every millisecond), "+
		"with certificates and policies on disk and kube-apiserver on loopback (the namespace cache must sync), %d runs:\n\n", len(r.startups))
	var ds []time.Duration
	var peak int64
	for _, s := range r.startups {
		ds = append(ds, s.ready)
		peak = max(peak, s.peakKB)
	}
	slices.Sort(ds)
	if len(ds) > 0 {
		fmt.Fprintf(w, "| runs | min | median | max | peak RSS when ready |\n|---:|---:|---:|---:|---:|\n")
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s |\n", len(ds), ms(ds[0]), ms(ds[len(ds)/2]), ms(ds[len(ds)-1]), mib(peak))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
