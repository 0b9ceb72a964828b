//go:build e2ebench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// benchBursts are the burst sizes and how many rounds of each are measured.
// BENCH_BURSTS (comma-separated sizes, e.g. "1000") measures some of them
// only.
var benchBursts = []struct{ size, rounds int }{{100, 3}, {500, 3}, {1000, 1}}

// selectedBursts is benchBursts, or the sizes BENCH_BURSTS names.
func selectedBursts(t *testing.T) []struct{ size, rounds int } {
	env := os.Getenv("BENCH_BURSTS")
	if env == "" {
		return benchBursts
	}
	var out []struct{ size, rounds int }
	for f := range strings.SplitSeq(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		i := slices.IndexFunc(benchBursts, func(b struct{ size, rounds int }) bool { return b.size == n })
		if err != nil || i < 0 {
			t.Fatalf("BENCH_BURSTS=%q: %q is not one of the burst sizes", env, f)
		}
		out = append(out, benchBursts[i])
	}
	return out
}

// TestBurstBench is the end-to-end part of `make bench` (build tag
// e2ebench; `make test` runs TestBurst, the 100-pod burst, instead). It
// creates bursts of 100, 500 and 1,000 concurrent sandbox pods, in one run,
// in five namespaces of the same control plane:
//
//   - webhook: selected by sandbox-webhook with the seed policy;
//   - floor: selected by a webhook configuration pointing at the floor
//     server of hack/bench/loadgen (TLS, reads the review, answers "allowed" with
//     no patch): the cost of calling any webhook;
//   - patch-floor: the same floor server answering every review with the
//     JSONPatch sandbox-webhook makes of the burst's pod (floor --patch):
//     the cost of calling any webhook that makes this change, which adds
//     the apiserver's work of applying the patch and storing a larger pod;
//   - none: selected by no webhook;
//   - guard: a second sandbox-webhook with the chart's webhook.guard (two
//     pods entries, the retry's match condition and the
//     ValidatingAdmissionPolicy the API server evaluates for every create).
//
// Each round creates a warm-up burst and then the measured burst in each
// namespace, the order rotating from round to round. Every pod must be
// admitted, mutated in the webhook namespace, equal to the webhook's pods
// (but for its name) in the patch-floor namespace and untouched in the
// others.
// Latencies (each create timed on its own) are reported per configuration,
// all rounds pooled, with the ratios to "none", in $BENCH_E2E_REPORT
// (default _output/bench/e2e-burst.md). Timing is reported, never asserted.
func TestBurstBench(t *testing.T) {
	const scope = "benchburst"
	webhookNS, floorNS, patchFloorNS, noneNS, guardNS := scope+"-webhook", scope+"-floor", scope+"-patchfloor", scope+"-none", scope+"-guarded"
	in := newInstance(t, scope, instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: webhookNS}}},
	})
	guarded := newInstance(t, scope+"-guard", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: guardNS}}},
		values:     map[string]any{"webhook": map[string]any{"guard": map[string]any{"enabled": true}}},
	})
	ctx := t.Context()
	ensureNamespace(t, noneNS, nil)
	floorName, floorPID := benchStartFloor(t, scope+"-floor", floorNS, "")
	patchFloorName, patchFloorPID := benchStartFloor(t, scope+"-patchfloor", patchFloorNS, benchSeedPatch(t, noneNS, webhookNS))
	// The patch-floor's pods must come out as the webhook's do.
	var webhookPod map[string]any
	samePod := func(p *corev1.Pod) []string {
		if probs := seedProblems(p, corev1.StorageMediumMemory); len(probs) > 0 {
			return probs
		}
		if d := cmp.Diff(webhookPod, benchComparable(p)); d != "" {
			return []string{"differs from the webhook's pod (-webhook +patch-floor):\n" + d}
		}
		return nil
	}
	// CPU time of the processes involved, per create: it does not depend
	// on what else the machine runs, unlike the latencies.
	host, err := url.Parse(suite.cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiserverPID := benchFindPID(t, filepath.Join(suite.root, "bin", "kube-apiserver"), "--secure-port="+host.Port())
	webhookPID := benchFindPID(t, suite.binary, "--port", strconv.Itoa(in.webhook.Port))
	guardPID := benchFindPID(t, suite.binary, "--port", strconv.Itoa(guarded.webhook.Port))
	webhookPod = benchComparable(createPod(t, testkit.SandboxPod(webhookNS, "reference", sleeping)))

	const callMetric = "apiserver_admission_webhook_admission_duration_seconds"
	const handlerMetric = "sandbox_webhook_admission_duration_seconds"
	type config struct {
		name, ns string
		webhook  string // the webhook's name in its configuration, "" for none
		check    func(*corev1.Pod) []string
	}
	configs := []config{
		{"webhook", webhookNS, in.mwc.Webhooks[0].Name, func(p *corev1.Pod) []string { return seedProblems(p, corev1.StorageMediumMemory) }},
		{"floor", floorNS, floorName, untouchedProblems},
		{"patch-floor", patchFloorNS, patchFloorName, samePod},
		{"none", noneNS, "", untouchedProblems},
		{"guard", guardNS, guarded.mwc.Webhooks[0].Name, func(p *corev1.Pod) []string { return seedProblems(p, corev1.StorageMediumMemory) }},
	}

	var report strings.Builder
	fmt.Fprintf(&report, "## End to end: bursts of concurrent pod creates (e2e, TestBurstBench)\n\n"+
		"kube-apiserver %s and etcd on loopback, the webhook and the floor each a local process, client-go in the test "+
		"(race detector %v), %d CPUs, GOMAXPROCS=%d, %s. Every create of a burst starts at once and is timed on its own; "+
		"each measured burst follows a warm-up burst of the same size in the same namespace; rounds rotate the order. "+
		"*floor* is a webhook that answers every review \"allowed\" with no patch (hack/bench/loadgen/floor); "+
		"*patch-floor* is the same server answering with the patch sandbox-webhook makes of the burst's pod (floor --patch), "+
		"so that webhook / patch-floor is what this webhook's own work adds; *none* is no webhook.\n",
		harness.KubeVersion, raceEnabled, runtime.NumCPU(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))

	for _, b := range selectedBursts(t) {
		// The webhook's peak RSS over this size's bursts (Linux: clear_refs
		// 5 makes VmHWM the current RSS).
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", webhookPID), []byte("5"), 0); err != nil {
			t.Fatalf("resetting the webhook's peak RSS: %v", err)
		}
		lat := map[string][]time.Duration{}
		errs := map[string]int{}
		callSum, callN := map[string]float64{}, map[string]float64{}
		var handlerSum, handlerN float64
		apiCPU, ownCPU := map[string]time.Duration{}, map[string]time.Duration{}
		ownPID := map[string]int{"webhook": webhookPID, "floor": floorPID, "patch-floor": patchFloorPID, "guard": guardPID}
		for round := range b.rounds {
			for i := range configs {
				c := configs[(i+round)%len(configs)]
				prefix := fmt.Sprintf("s%d-r%d", b.size, round)
				warm := burst(ctx, c.ns, prefix+"-warmup", b.size)
				checkBurst(t, c.name+" warm-up", warm, b.size, c.check)
				var cs, cn, hs, hn float64
				if c.webhook != "" {
					l := "name=" + c.webhook
					cs, cn = apiserverMetric(t, callMetric+"_sum", l), apiserverMetric(t, callMetric+"_count", l)
				}
				if c.name == "webhook" {
					hs, hn = in.metric(t, handlerMetric+"_sum"), in.metric(t, handlerMetric+"_count")
				}
				a0, o0 := benchCPU(t, apiserverPID), benchCPU(t, ownPID[c.name])
				r := burst(ctx, c.ns, prefix, b.size)
				apiCPU[c.name] += benchCPU(t, apiserverPID) - a0
				ownCPU[c.name] += benchCPU(t, ownPID[c.name]) - o0
				checkBurst(t, c.name, r, b.size, c.check)
				if c.webhook != "" {
					l := "name=" + c.webhook
					callSum[c.name] += apiserverMetric(t, callMetric+"_sum", l) - cs
					callN[c.name] += apiserverMetric(t, callMetric+"_count", l) - cn
				}
				if c.name == "webhook" {
					handlerSum += in.metric(t, handlerMetric+"_sum") - hs
					handlerN += in.metric(t, handlerMetric+"_count") - hn
				}
				lat[c.name] = append(lat[c.name], r.latencies...)
				errs[c.name] += len(r.errs)
				t.Logf("burst of %d, round %d, %s: %s", b.size, round+1, c.name, quantiles(r.latencies))
			}
		}
		none := lat["none"]
		fmt.Fprintf(&report, "\n### %d concurrent creates, %d rounds pooled\n\n", b.size, b.rounds)
		fmt.Fprintf(&report, "| configuration | p50 / none | p99 / none | apiserver CPU per create / none | creates | errors | p50 | p90 | p99 | max | apiserver CPU per create | webhook process CPU per create | apiserver's mean webhook call |\n")
		fmt.Fprintf(&report, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		n := float64(b.size * b.rounds)
		for _, c := range configs {
			l := lat[c.name]
			call, own := "—", "—"
			if callN[c.name] > 0 {
				call = fmt.Sprintf("%.2f ms", callSum[c.name]/callN[c.name]*1000)
			}
			if ownPID[c.name] != 0 {
				own = fmt.Sprintf("%.0f µs", float64(ownCPU[c.name].Microseconds())/n)
			}
			fmt.Fprintf(&report, "| %s | %s | %s | %s | %d | %d | %s | %s | %s | %s | %.0f µs | %s | %s |\n", c.name,
				benchRatio(quantile(l, .5), quantile(none, .5)), benchRatio(quantile(l, .99), quantile(none, .99)),
				benchRatio(apiCPU[c.name], apiCPU["none"]),
				len(l), errs[c.name], benchMS(quantile(l, .5)), benchMS(quantile(l, .9)), benchMS(quantile(l, .99)), benchMS(quantile(l, 1)),
				float64(apiCPU[c.name].Microseconds())/n, own, call)
		}
		fmt.Fprintf(&report, "\nguard p50 / webhook p50: %s, guard p99 / webhook p99: %s. "+
			"webhook p99 / floor p99: %s; webhook p99 / patch-floor p99: %s; patch-floor p99 / none p99: %s. "+
			"The webhook's own handler time: mean %.3f ms over %.0f admissions (%s); its peak RSS over this size's bursts: %.1f MiB.\n",
			benchRatio(quantile(lat["guard"], .5), quantile(lat["webhook"], .5)), benchRatio(quantile(lat["guard"], .99), quantile(lat["webhook"], .99)),
			benchRatio(quantile(lat["webhook"], .99), quantile(lat["floor"], .99)),
			benchRatio(quantile(lat["webhook"], .99), quantile(lat["patch-floor"], .99)),
			benchRatio(quantile(lat["patch-floor"], .99), quantile(lat["none"], .99)),
			handlerSum/max(handlerN, 1)*1000, handlerN, handlerMetric, float64(procMemory(t, webhookPID).hwm)/(1<<20))

		// Keep etcd small for the next size.
		for _, c := range configs {
			if err := suite.cs.CoreV1().Pods(c.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatalf("deleting the pods of %s: %v", c.ns, err)
			}
		}
	}
	t.Log("\n" + report.String())
	path := os.Getenv("BENCH_E2E_REPORT")
	if path == "" {
		path = filepath.Join(suite.root, "_output", "bench", "e2e-burst.md")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report written to %s", path)
}

// benchSeedPatch returns a file holding the JSONPatch sandbox-webhook makes
// of the burst's pod (testkit.SandboxPod) in the namespace webhookNS under the
// seed policy (examples/policies/memory, as the instance serves it): the
// pod as the apiserver sends it for admission is that of a dry-run create
// in noneNS, which no webhook selects, and the patch is mutate.Patch of
// what mutate.Pod makes of it, as the webhook computes it.
func benchSeedPatch(t *testing.T, noneNS, webhookNS string) string {
	t.Helper()
	ctx := t.Context()
	pod, err := suite.cs.CoreV1().Pods(noneNS).Create(ctx, testkit.SandboxPod(noneNS, "patch-probe", sleeping), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	// What the apiserver has not set yet when it calls a mutating webhook.
	pod.Namespace = webhookNS
	pod.UID, pod.ResourceVersion, pod.CreationTimestamp = "", "", metav1.Time{}
	ns, err := suite.cs.CoreV1().Namespaces().Get(ctx, webhookNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.Load(filepath.Join(suite.root, "examples/policies/memory"))
	if err != nil {
		t.Fatal(err)
	}
	res := mutate.Pod(pod, mutate.Namespace{Name: ns.Name, Labels: ns.Labels}, set, mutate.Options{})
	if !res.Changed {
		t.Fatalf("the seed policy does not change the burst's pod in %s", webhookNS)
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := mutate.Patch(raw, pod, res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(path, patch, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// benchComparable is comparable without the pod's name, which differs
// from burst to burst.
func benchComparable(pod *corev1.Pod) map[string]any {
	p := pod.DeepCopy()
	p.Name = ""
	return comparable(p)
}

// benchStartFloor builds and starts hack/bench/loadgen/floor with its own serving
// certificate (with --patch patchFile unless that is ""), points a webhook
// configuration (the chart's, scoped to ns) at it, waits until the
// apiserver calls it and returns the webhook's name and the floor's process
// id.
func benchStartFloor(t *testing.T, release, ns, patchFile string) (string, int) {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	floor := filepath.Join(dir, "floor")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", floor, "./loadgen/floor")
	build.Dir = filepath.Join(suite.root, "hack", "bench") // the bench tools' module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the floor server: %v\n%s", err, out)
	}
	certs, err := harness.NewCerts(ctx, suite.binary, filepath.Join(dir, "tls"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t))
	logFile, err := os.Create(filepath.Join(dir, "floor.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--cert-dir", certs.Dir(), "--address", addr}
	if patchFile != "" {
		args = append(args, "--patch", patchFile)
	}
	cmd := exec.Command(floor, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})

	ensureNamespace(t, ns, map[string]string{instanceLabel: release})
	mwc, err := chart.RenderWebhookConfiguration(ctx, suite.root, chart.ConfigOptions{
		Release:           release,
		Namespace:         release + "-system",
		URL:               "https://" + addr + "/mutate-v1-pod",
		CABundle:          certs.Current().CA,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{instanceLabel: release}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := chart.InstallWebhookConfiguration(ctx, suite.cs, mwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	})
	name := mwc.Webhooks[0].Name
	label := "name=" + name
	i := 0
	testkit.WaitFor(t, "the apiserver to call the floor webhook", time.Minute, func() error {
		i++
		if _, err := suite.cs.CoreV1().Pods(ns).Create(ctx, testkit.SandboxPod(ns, fmt.Sprintf("probe-%d", i), sleeping), metav1.CreateOptions{}); err != nil {
			return err
		}
		// No series yet: the apiserver has not called the webhook.
		n, err := testkit.Metric(apiserverMetrics(t), "apiserver_admission_webhook_admission_duration_seconds_count", label)
		if err == nil && n == 0 {
			err = fmt.Errorf("%v calls", n)
		}
		return err
	})
	return name, cmd.Process.Pid
}

// benchFindPID returns the process whose command line holds every one of
// args.
func benchFindPID(t *testing.T, args ...string) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.Split(string(b), "\x00")
		found := true
		for _, a := range args {
			if !slices.Contains(cmdline, a) {
				found = false
				break
			}
		}
		if found {
			return pid
		}
	}
	t.Fatalf("no process with %q in its command line", args)
	return 0
}

// benchCPU returns the CPU time (user and system) process pid has used;
// zero for pid 0.
func benchCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var ticks int64
	for _, s := range f[11:13] { // utime and stime, fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

func benchMS(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func benchRatio(a, b time.Duration) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}
