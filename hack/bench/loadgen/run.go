package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
)

type options struct {
	binary      string
	assets      string
	out         string
	concurrency []int
	requests    int
	duration    time.Duration
	warmup      int
	pod         string
	policies    int
	startupRuns int
	// rates, when set, are open-loop rates offered to the webhook alone
	// instead of the concurrency levels (writeRates).
	rates      []int
	serverCPUs string
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.StringVar(&o.binary, "binary", filepath.Join(benchdata.Root(), "bin", "sandbox-webhook"), "the sandbox-webhook server binary, as the container image runs it (make build-server)")
	fs.StringVar(&o.assets, "assets", filepath.Join(benchdata.Root(), "bin"), "directory holding kube-apiserver and etcd (make tools)")
	fs.StringVar(&o.out, "out", "", "write the markdown report here as well as to stdout")
	conc := fs.String("concurrency", "1,10,100", "comma-separated concurrency levels (one keep-alive connection per concurrent client)")
	fs.IntVar(&o.requests, "requests", 20000, "measured requests per target and level (at most)")
	fs.DurationVar(&o.duration, "duration", 15*time.Second, "longest measured phase per target and level")
	fs.IntVar(&o.warmup, "warmup", 20, "unmeasured requests per connection before each measured phase")
	fs.StringVar(&o.pod, "pod", "typical", "benchmark pod: typical, large or non-matching")
	fs.IntVar(&o.policies, "policies", 1, "policies loaded (the seed policy plus non-matching ones)")
	fs.IntVar(&o.startupRuns, "startup-runs", 5, "times the webhook is started to measure start-to-ready")
	rates := fs.String("rates", "", "comma-separated open-loop rates (req/s) offered to the webhook alone, to find the highest one held at p99 < 100 ms; replaces the concurrency levels")
	fs.StringVar(&o.serverCPUs, "server-cpus", "", "run the webhook under taskset -c with this CPU list (e.g. 0), so that it gets those cores only")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *rates != "" {
		for _, s := range strings.Split(*rates, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 20000 {
				return nil, fmt.Errorf("--rates: %q is not a number between 1 and 20000", s)
			}
			o.rates = append(o.rates, n)
		}
	}
	for _, s := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("--concurrency: %q is not a number between 1 and 1000", s)
		}
		o.concurrency = append(o.concurrency, n)
	}
	if o.requests < 1 || o.duration <= 0 || o.warmup < 1 || o.policies < 1 || o.startupRuns < 1 {
		return nil, errors.New("--requests, --duration, --warmup, --policies and --startup-runs must be positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	var body []byte
	for _, c := range benchdata.Cases() {
		if c.Name == o.pod {
			body = benchdata.Review(c.Pod)
		}
	}
	if body == nil {
		return fmt.Errorf("--pod %q: want typical, large or non-matching", o.pod)
	}
	binary, err := filepath.Abs(o.binary)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("--binary: %w (make build-server)", err)
	}
	assets, err := filepath.Abs(o.assets)
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "sandbox-webhook-loadgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	logf("starting kube-apiserver and etcd from %s", assets)
	cpLog, err := os.Create(filepath.Join(tmp, "controlplane.log"))
	if err != nil {
		return err
	}
	defer cpLog.Close()
	cp, err := harness.StartControlPlane(assets, cpLog)
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchdata.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}

	certDir := filepath.Join(tmp, "tls")
	if _, err := harness.Run(ctx, binary, "certs", "generate", "--out-dir", certDir, "--host", "127.0.0.1"); err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("certs generate wrote no usable ca.crt")
	}
	policyDir := filepath.Join(tmp, "policies")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		return err
	}
	if err := benchdata.WritePolicies(policyDir, o.policies); err != nil {
		return err
	}
	wh := webhookProcess{binary: binary, kubeconfig: kubeconfig, certDir: certDir, policyDir: policyDir, logDir: tmp, cpus: o.serverCPUs}

	rep := &report{opts: o, reviewBytes: len(body), started: time.Now().UTC()}
	logf("measuring start-to-ready %d times", o.startupRuns)
	for i := range o.startupRuns {
		s, err := wh.startup(ctx, i)
		if err != nil {
			return err
		}
		rep.startups = append(rep.startups, s)
	}

	web, err := wh.start(ctx, "load")
	if err != nil {
		return err
	}
	defer web.stop()
	if err := buildFloors(ctx, tmp); err != nil {
		return err
	}
	floor, err := startFloor(ctx, filepath.Join(tmp, "floor"), certDir, filepath.Join(tmp, "floor.log"))
	if err != nil {
		return err
	}
	defer floor.stop()
	decodeFloor, err := startFloor(ctx, filepath.Join(tmp, "decodefloor"), certDir, filepath.Join(tmp, "decodefloor.log"))
	if err != nil {
		return err
	}
	defer decodeFloor.stop()
	targets := []*target{
		{name: "floor", url: floor.url, proc: floor},
		{name: "decode-floor", url: decodeFloor.url, proc: decodeFloor},
		{name: "webhook", url: web.url, proc: web, patched: o.pod != "non-matching"},
	}
	for _, t := range targets {
		if err := waitAnswers(ctx, t, body, roots); err != nil {
			return err
		}
	}
	if len(o.rates) > 0 {
		var levels []*rateLevel
		for _, r := range o.rates {
			logf("webhook at %d req/s", r)
			l, err := offer(ctx, targets[2], r, body, roots, o)
			if err != nil {
				return err
			}
			levels = append(levels, l)
		}
		var buf bytes.Buffer
		writeRates(&buf, o, levels)
		return writeOut(o, &buf)
	}
	for _, c := range o.concurrency {
		for _, t := range targets {
			if err := ctx.Err(); err != nil {
				return err
			}
			logf("%s at concurrency %d", t.name, c)
			r, err := drive(ctx, t, c, body, roots, o)
			if err != nil {
				return err
			}
			rep.levels = append(rep.levels, r)
		}
	}
	for _, t := range targets {
		rep.lifetimePeak = append(rep.lifetimePeak, peakOf{t.name, t.proc.lifetimePeakKB})
	}
	if web.exited() {
		return fmt.Errorf("the webhook exited during the run; log: %s", tail(web.logPath))
	}

	var buf bytes.Buffer
	rep.write(&buf)
	return writeOut(o, &buf)
}

// writeOut writes the report to o.out, if set, and to stdout.
func writeOut(o *options, buf *bytes.Buffer) error {
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	_, err := io.Copy(os.Stdout, buf)
	return err
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
}

// machine describes where the numbers come from.
func machine() string {
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = fmt.Sprintf(", load average %s %s %s at the end", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%d CPUs, GOMAXPROCS=%d, %s/%s, %s%s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), load)
}
