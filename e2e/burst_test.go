package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

// burstSize is the seed's scenario: about a hundred sandbox pods at once.
const burstSize = 100

// burstResult is one burst of concurrent creates.
type burstResult struct {
	latencies []time.Duration // one per successful create
	pods      []*corev1.Pod   // as stored
	errs      []error
}

// burst creates n sandbox pods in ns at once: every create starts when all
// goroutines are ready, and each is timed on its own.
func burst(ctx context.Context, ns, prefix string, n int) burstResult {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		res   burstResult
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			pod := sandboxPod(ns, fmt.Sprintf("%s-%03d", prefix, i))
			<-start
			t0 := time.Now()
			got, err := suite.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errs = append(res.errs, fmt.Errorf("%s: %w", pod.Name, err))
				return
			}
			res.latencies = append(res.latencies, d)
			res.pods = append(res.pods, got)
		})
	}
	close(start)
	wg.Wait()
	return res
}

// quantiles formats p50/p90/p99/max of ds (nearest rank).
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		i := int(p*float64(len(s)) + 0.999999) // ceil(p*n), 1-based rank
		return s[min(max(i, 1), len(s))-1]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(s), ms(q(0.50)), ms(q(0.90)), ms(q(0.99)), ms(s[len(s)-1]))
}

// Case 8: a burst of 100 concurrent sandbox pod creates through the webhook
// is all admitted and all mutated; the same burst with the webhook
// configuration removed gives the baseline. Both latency distributions are
// logged and written to $E2E_REPORT (default _output/e2e-burst.txt) for the
// benchmark report. Timing is reported, never asserted.
//
// The first burst through the webhook also pays for the apiserver opening a
// TLS connection to it per concurrent request; it is reported on its own.
// The measured bursts on both sides follow a burst that warmed the same path.
func TestBurst(t *testing.T) {
	const withNS, withoutNS = "burst-with", "burst-without"
	in := newInstance(t, "burst", instanceOptions{
		namespaces: []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: withNS}},
			{ObjectMeta: metav1.ObjectMeta{Name: withoutNS}},
		},
	})
	ctx := t.Context()

	checkAll := func(what string, r burstResult, mutated bool) {
		t.Helper()
		for i, err := range r.errs {
			if i == 3 {
				t.Errorf("%s: … %d more failed creates", what, len(r.errs)-3)
				break
			}
			t.Errorf("%s: create failed: %v", what, err)
		}
		bad := 0
		for _, pod := range r.pods {
			var p []string
			if mutated {
				p = seedProblems(pod, corev1.StorageMediumMemory)
			} else {
				p = untouchedProblems(pod)
			}
			if len(p) > 0 {
				bad++
				if bad <= 3 {
					t.Errorf("%s: pod %s:%s", what, fmtPod(pod), joinProblems(p))
				}
			}
		}
		if len(r.pods) != burstSize || bad > 0 {
			t.Errorf("%s: %d/%d admitted, %d of them not as expected (mutated=%v)", what, len(r.pods), burstSize, bad, mutated)
		}
	}

	cold := burst(ctx, withNS, "first", burstSize)
	checkAll("first burst through the webhook", cold, true)
	// Where the time goes: the webhook's own handler time, and the call as
	// the apiserver sees it (TLS, HTTP, encoding, the handler).
	const (
		handlerMetric = "sandbox_webhook_admission_duration_seconds"
		callMetric    = "apiserver_admission_webhook_admission_duration_seconds"
	)
	webhookLabel := fmt.Sprintf("name=%q", in.mwc.Webhooks[0].Name)
	countBefore, sumBefore := in.metric(t, handlerMetric+"_count"), in.metric(t, handlerMetric+"_sum")
	callCountBefore, callSumBefore := apiserverMetric(t, callMetric+"_count", webhookLabel), apiserverMetric(t, callMetric+"_sum", webhookLabel)
	with := burst(ctx, withNS, "sandbox", burstSize)
	checkAll("burst through the webhook", with, true)
	admissions := in.metric(t, handlerMetric+"_count") - countBefore
	handler := (in.metric(t, handlerMetric+"_sum") - sumBefore) / max(admissions, 1)
	calls := apiserverMetric(t, callMetric+"_count", webhookLabel) - callCountBefore
	call := (apiserverMetric(t, callMetric+"_sum", webhookLabel) - callSumBefore) / max(calls, 1)

	// Remove the configuration and wait until the apiserver stops calling it.
	if err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, in.mwc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := harness.WaitMutating(ctx, suite.cs, sandboxPod(withoutNS, "probe"), false); err != nil {
		t.Fatal(err)
	}
	checkAll("warm-up burst without the webhook", burst(ctx, withoutNS, "warmup", burstSize), false)
	without := burst(ctx, withoutNS, "sandbox", burstSize)
	checkAll("burst without the webhook", without, false)

	report := fmt.Sprintf("# e2e burst: %d concurrent sandbox pod creates (client-go), kube-apiserver %s + etcd on loopback, GOMAXPROCS=%d, race detector in the client=%v, %s\n"+
		"with-webhook    %s errors=%d\n"+
		"without-webhook %s errors=%d\n"+
		"with-webhook-first-burst %s errors=%d (the apiserver opens its connections to the webhook)\n"+
		"webhook-handler mean=%.2fms over %.0f admissions (%s)\n"+
		"webhook-call    mean=%.2fms over %.0f calls as the apiserver saw them (%s)\n",
		burstSize, harness.KubeVersion, runtime.GOMAXPROCS(0), raceEnabled, time.Now().UTC().Format(time.RFC3339),
		quantiles(with.latencies), len(with.errs), quantiles(without.latencies), len(without.errs),
		quantiles(cold.latencies), len(cold.errs), handler*1000, admissions, handlerMetric, call*1000, calls, callMetric)
	t.Log("\n" + report)
	writeReport(t, report)
}

// apiserverMetric reads a metric (summed over the series matching labels)
// from the apiserver's /metrics.
func apiserverMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	b, err := suite.cs.RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading the apiserver's /metrics: %v", err)
	}
	v, _ := metricSum(string(b), name, labels...)
	return v
}

// writeReport writes the burst report to $E2E_REPORT, or
// _output/e2e-burst.txt under the repository root.
func writeReport(t *testing.T, report string) {
	path := os.Getenv("E2E_REPORT")
	if path == "" {
		path = filepath.Join(suite.root, "_output", "e2e-burst.txt")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("writing the burst report: %v", err)
		return
	}
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Errorf("writing the burst report: %v", err)
		return
	}
	t.Logf("burst report written to %s", path)
}

// Case 9: the serving certificate is rotated while pods are being created as
// fast as the apiserver takes them, the way a rotation goes in a cluster: the
// new CA joins the configuration's caBundle, the new certificate and key are
// swapped into the mounted directory at once (a Secret update), and the old
// CA leaves the bundle. Zero creates fail, every pod is mutated, and the
// server is seen serving the new certificate.
func TestCertRotationUnderLoad(t *testing.T) {
	const ns = "rotation"
	in := newInstance(t, "rotation", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	ctx := t.Context()
	old := in.certs.Current()
	next, err := in.certs.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mwc := in.mwc.DeepCopy()
	mwc.Webhooks[0].ClientConfig.CABundle = append(append([]byte{}, old.CA...), next.CA...)
	in.install(t, mwc)
	// The apiserver picks the bundle change up asynchronously; the old CA is
	// in both, so creates succeed either way, and the new certificate is not
	// served before the load below has run for a while.

	var (
		created, failed atomic.Int64
		stop            = make(chan struct{})
		wg              sync.WaitGroup
		mu              sync.Mutex
		errs            []error
		pods            []*corev1.Pod
	)
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := suite.cs.CoreV1().Pods(ns).Create(ctx, sandboxPod(ns, fmt.Sprintf("w%d-%04d", w, i)), metav1.CreateOptions{})
				mu.Lock()
				if err != nil {
					failed.Add(1)
					errs = append(errs, err)
				} else {
					created.Add(1)
					pods = append(pods, got)
				}
				mu.Unlock()
			}
		})
	}
	waitCreated := func(n int64) {
		waitFor(t, fmt.Sprintf("%d creates", n), func() (bool, string) {
			return created.Load()+failed.Load() >= n, fmt.Sprintf("%d created, %d failed", created.Load(), failed.Load())
		})
	}
	func() {
		defer func() { close(stop); wg.Wait() }()
		waitCreated(50)
		if err := in.certs.Activate(next); err != nil {
			t.Fatal(err)
		}
		atRotation := created.Load() + failed.Load()
		waitFor(t, "the webhook to serve the new certificate", func() (bool, string) {
			return servesCert(in.webhook.Address(), next)
		})
		atServing := created.Load() + failed.Load()
		waitCreated(atServing + 50)
		// Finish the rotation: drop the old CA. The apiserver builds a new
		// client for the new bundle, whose handshakes must verify against
		// the new CA alone.
		mwc.Webhooks[0].ClientConfig.CABundle = next.CA
		in.install(t, mwc)
		atBundle := created.Load() + failed.Load()
		if err := harness.WaitMutating(ctx, suite.cs, sandboxPod(ns, "probe"), true); err != nil {
			t.Error(err)
		}
		waitCreated(atBundle + 100)
		t.Logf("cert rotation under load: %d creates before the swap, %d while the server picked it up, %d before the old CA was dropped, %d after",
			atRotation, atServing-atRotation, atBundle-atServing, created.Load()+failed.Load()-atBundle)
	}()

	for i, err := range errs {
		if i == 5 {
			t.Errorf("… %d more", len(errs)-5)
			break
		}
		t.Errorf("create failed during the rotation: %v", err)
	}
	for _, pod := range pods {
		if p := seedProblems(pod, corev1.StorageMediumMemory); len(p) > 0 {
			t.Errorf("pod %s:%s", fmtPod(pod), joinProblems(p))
			break
		}
	}
	t.Logf("%d pods created during the rotation, %d failed", created.Load(), failed.Load())
}

// servesCert reports whether a TLS handshake with addr, trusting only g's CA,
// presents g's certificate.
func servesCert(addr string, g *harness.CertGeneration) (bool, string) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(g.CA)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		return false, err.Error()
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	if !leaf.Equal(g.Leaf) {
		return false, "serving serial " + leaf.SerialNumber.String()
	}
	return true, ""
}
