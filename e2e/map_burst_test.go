package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// TestBurstMAP: the burst of 100 concurrent sandbox pod creates, in one run,
// through the exported MutatingAdmissionPolicy, through the webhook, and
// with neither (each in its own namespace, warmed up the same way), twice,
// the second round in the reverse order; then 30
// creates one at a time through each, for the cost per pod without
// contention. Every
// pod is admitted; each MAP pod equals the webhook pod of the same name;
// no pod of the third namespace is mutated. The latency distributions are
// logged and written to e2e-burst-map.txt next to the burst report
// ($E2E_REPORT's directory, default _output/). Timing is reported, never
// asserted.
func TestBurstMAP(t *testing.T) {
	const scope = "burstmap"
	mapNS, webhookNS, noneNS := scope+"-map", scope+"-webhook", scope+"-none"
	newInstance(t, scope, instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: webhookNS}}},
	})
	ensureNamespace(t, mapNS, map[string]string{mapLabel: scope})
	ensureNamespace(t, noneNS, nil)
	exported, gaps := exportSet(t, golden.Set{Name: "memory", Policies: []string{"examples/policies/memory"}})
	if len(gaps) > 0 {
		t.Fatalf("gaps: %v", gaps)
	}
	installMAP(t, exported, scope, testkit.SandboxPod(mapNS, "probe", sleeping))
	ctx := t.Context()

	type run struct {
		name, ns string
		res      burstResult
		// plugin is the apiserver's time per pod in each mutating
		// admission plugin (reinvocations included), in seconds.
		plugin map[string]float64
		p99    []time.Duration // of each round
	}
	runs := []*run{{name: "neither", ns: noneNS}, {name: "with-webhook", ns: webhookNS}, {name: "with-map", ns: mapNS}}
	for _, r := range runs {
		for i := range 10 {
			createPod(t, testkit.SandboxPod(r.ns, fmt.Sprintf("warmup-%d", i), sleeping))
		}
	}
	// Where the time goes, as the apiserver measures it: its time in the
	// MAP plugin and in the webhook plugin (the call included).
	const pluginMetric = "apiserver_admission_controller_admission_duration_seconds_sum"
	plugins := []string{"MutatingAdmissionPolicy", "MutatingAdmissionWebhook"}
	pluginTime := func() map[string]float64 {
		m := map[string]float64{}
		for _, p := range plugins {
			m[p] = apiserverMetric(t, pluginMetric, fmt.Sprintf("name=%q", p), `operation="CREATE"`, `type="admit"`)
		}
		return m
	}
	// Two rounds, the second in the reverse order, so that no path always
	// runs first (or last) after the warm-up.
	for round, order := range [][]*run{runs, {runs[2], runs[1], runs[0]}} {
		for _, r := range order {
			before := pluginTime()
			res := burst(ctx, r.ns, fmt.Sprintf("sandbox-r%d", round), burstSize)
			after := pluginTime()
			if r.plugin == nil {
				r.plugin = map[string]float64{}
			}
			for _, p := range plugins {
				r.plugin[p] += (after[p] - before[p]) / (2 * burstSize)
			}
			for _, err := range res.errs {
				t.Errorf("%s: create failed: %v", r.name, err)
			}
			if len(res.pods) != burstSize {
				t.Errorf("%s, round %d: %d/%d admitted", r.name, round+1, len(res.pods), burstSize)
			}
			r.p99 = append(r.p99, quantile(res.latencies, 0.99))
			r.res.latencies = append(r.res.latencies, res.latencies...)
			r.res.pods = append(r.res.pods, res.pods...)
			r.res.errs = append(r.res.errs, res.errs...)
		}
	}

	// The same one pod at a time: the cost per pod without contention.
	const sequential = 30
	type seq struct {
		mean   time.Duration
		plugin map[string]float64
	}
	seqs := map[string]seq{}
	for _, r := range runs {
		before := pluginTime()
		start := time.Now()
		for i := range sequential {
			createPod(t, testkit.SandboxPod(r.ns, fmt.Sprintf("one-%02d", i), sleeping))
		}
		s := seq{mean: time.Since(start) / sequential, plugin: map[string]float64{}}
		after := pluginTime()
		for _, p := range plugins {
			s.plugin[p] = (after[p] - before[p]) / sequential
		}
		seqs[r.name] = s
	}

	byName := func(pods []*corev1.Pod) map[string]*corev1.Pod {
		m := map[string]*corev1.Pod{}
		for _, p := range pods {
			m[p.Name] = p
		}
		return m
	}
	named := func(name string) *run {
		return runs[slices.IndexFunc(runs, func(r *run) bool { return r.name == name })]
	}
	viaMAP, viaWebhook := byName(named("with-map").res.pods), byName(named("with-webhook").res.pods)
	differ := 0
	for _, name := range slices.Sorted(maps.Keys(viaMAP)) {
		p := viaMAP[name]
		if probs := seedProblems(p, corev1.StorageMediumMemory); len(probs) > 0 {
			t.Errorf("MAP pod %s:%s", fmtPod(p), joinProblems(probs))
			continue
		}
		if w, ok := viaWebhook[name]; ok {
			if d := cmp.Diff(comparable(w), comparable(p)); d != "" {
				differ++
				if differ <= 3 {
					t.Errorf("pod %s differs (-webhook +MAP):\n%s", name, d)
				}
			}
		}
	}
	for _, p := range named("with-webhook").res.pods {
		if probs := seedProblems(p, corev1.StorageMediumMemory); len(probs) > 0 {
			t.Errorf("webhook pod %s:%s", fmtPod(p), joinProblems(probs))
			break
		}
	}
	for _, p := range named("neither").res.pods {
		if harness.Mutated(p) {
			t.Errorf("pod %s in a namespace neither selects was mutated", fmtPod(p))
			break
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# e2e burst, MAP vs webhook vs neither: %d concurrent sandbox pod creates (client-go), twice each (rounds in opposite orders), examples/policies/memory, kube-apiserver %s + etcd on loopback, GOMAXPROCS=%d, race detector in the client=%v, %s\n",
		burstSize, harness.KubeVersion, runtime.GOMAXPROCS(0), raceEnabled, time.Now().UTC().Format(time.RFC3339))
	for _, r := range runs {
		fmt.Fprintf(&b, "%-13s %s errors=%d p99-per-round=%s apiserver-time-per-pod MutatingAdmissionPolicy=%.2fms MutatingAdmissionWebhook=%.2fms\n",
			r.name, quantiles(r.res.latencies), len(r.res.errs), fmtDurations(r.p99), r.plugin[plugins[0]]*1000, r.plugin[plugins[1]]*1000)
	}
	fmt.Fprintf(&b, "# then %d creates one at a time: mean create latency, and the apiserver's time per pod in each plugin (%s)\n", sequential, pluginMetric)
	for _, r := range runs {
		s := seqs[r.name]
		fmt.Fprintf(&b, "%-13s sequential mean=%.2fms MutatingAdmissionPolicy=%.2fms MutatingAdmissionWebhook=%.2fms\n",
			r.name, float64(s.mean)/float64(time.Millisecond), s.plugin[plugins[0]]*1000, s.plugin[plugins[1]]*1000)
	}
	t.Log("\n" + b.String())
	path := filepath.Join(suite.root, "_output", "e2e-burst-map.txt")
	if r := os.Getenv("E2E_REPORT"); r != "" {
		path = filepath.Join(filepath.Dir(r), "e2e-burst-map.txt")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report written to %s", path)
}

// quantile returns the p-quantile of ds (nearest rank), as quantiles does.
func quantile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s)) + 0.999999)
	return s[min(max(i, 1), len(s))-1]
}

func fmtDurations(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(out, ",")
}
