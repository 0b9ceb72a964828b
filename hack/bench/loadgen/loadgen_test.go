package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{.5: 50 * time.Millisecond, .99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := quantile(ds, p); got != want {
			t.Errorf("quantile(%v) = %v, want %v", p, got, want)
		}
	}
	if quantile(nil, .5) != 0 {
		t.Error("quantile of nothing")
	}
}

// TestProcessCPU reads this process's own CPU time after burning some.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time went from %v to %v over a busy loop", before, after)
	}
}

// TestReportRatios: the summary gives the webhook's throughput, p99 and CPU
// per request as ratios to each floor at the same concurrency.
func TestReportRatios(t *testing.T) {
	lvl := func(target string, rate int, p99, cpu time.Duration) *level {
		l := &level{target: target, concurrency: 100, elapsed: time.Second, cpu: cpu * time.Duration(rate), resetOK: true}
		for i := range rate {
			d := p99 / 2
			if i >= rate*99/100 {
				d = p99
			}
			l.latencies = append(l.latencies, d)
		}
		return l
	}
	r := &report{
		opts:   &options{concurrency: []int{100}, pod: "typical", policies: 1, warmup: 1, requests: 1, duration: time.Second},
		levels: []*level{lvl("floor", 4000, 10*time.Millisecond, 25*time.Microsecond), lvl("decode-floor", 2000, 20*time.Millisecond, 100*time.Microsecond), lvl("webhook", 1000, 40*time.Millisecond, 200*time.Microsecond)},
	}
	var b strings.Builder
	r.write(&b)
	if want := "| 100 | 0.25× | 4.00× | 8.00× | 0.50× | 2.00× | 2.00× |"; !strings.Contains(b.String(), want) {
		t.Errorf("no summary row %q in:\n%s", want, b.String())
	}
}

// TestNoHelm: the load generator starts processes through e2e/harness, which
// must not link the Helm SDK (chart rendering is e2e/harness/chart's).
func TestNoHelm(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/sandbox-webhook/sandbox-webhook/e2e/harness") {
		t.Fatal("the load generator no longer links e2e/harness: this test proves nothing")
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "helm.sh/") {
			t.Errorf("the load generator links %s", p)
		}
	}
}

// TestRatesCeiling: a rate is held only with p99 under 100 ms and no error,
// and the report names the highest rate held, not the last one.
func TestRatesCeiling(t *testing.T) {
	lvl := func(rate int, p99 time.Duration, errs int) *rateLevel {
		l := &rateLevel{rate: rate, sent: rate, elapsed: time.Second, errors: errs}
		for i := range rate {
			d := time.Millisecond
			if i >= rate*98/100 { // the slowest 2%: the p99
				d = p99
			}
			l.latencies = append(l.latencies, d)
		}
		return l
	}
	var b strings.Builder
	writeRates(&b, &options{duration: time.Second}, []*rateLevel{
		lvl(100, 5*time.Millisecond, 0), lvl(200, 99*time.Millisecond, 0), lvl(300, 100*time.Millisecond, 0), lvl(400, 5*time.Millisecond, 1),
	})
	if !strings.Contains(b.String(), "Highest rate held: **200 req/s**") {
		t.Errorf("report:\n%s", b.String())
	}
	if _, err := parseFlags([]string{"--rates", "100,0"}); err == nil {
		t.Error("--rates 100,0 accepted")
	}
}
