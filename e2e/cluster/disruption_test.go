//go:build nodee2e

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// createsPerSecond is the steady stream of sandbox pod creates the
// disruptions run under.
const createsPerSecond = 20

// load is a stream of sandbox pod creates, each checked for the mutation.
type load struct {
	mu        sync.Mutex
	creates   int
	failed    int
	unmutated int
	latencies []time.Duration
	errors    map[string]int
}

// result is what a stream saw.
type result struct {
	creates, failed, unmutated int
	p50, p99                   time.Duration
	errors                     map[string]int
}

// runLoad creates createsPerSecond pods a second in ns until stop is
// called, each a sandbox pod that is never scheduled, and deletes them as
// it goes: one every 1/createsPerSecond s, or with burst all of a second's
// at once (as a training run starting its sandboxes does), which makes the
// API server call the webhook over several connections at a time rather
// than reuse one. A create that fails is counted failed, one whose
// returned pod lacks the webhook's status annotation unmutated.
func runLoad(cs kubernetes.Interface, ns string, burst bool) (stop func() result) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{errors: map[string]int{}}
	var wg sync.WaitGroup
	every, each := time.Second/createsPerSecond, 1
	if burst {
		every, each = time.Second, createsPerSecond
	}
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for range each {
				wg.Go(func() { l.create(cs, ns) })
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			_ = cs.CoreV1().Pods(ns).DeleteCollection(context.Background(),
				metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{LabelSelector: "load=true"})
		}
	})
	return func() result {
		cancel()
		wg.Wait()
		_ = cs.CoreV1().Pods(ns).DeleteCollection(context.Background(),
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{LabelSelector: "load=true"})
		l.mu.Lock()
		defer l.mu.Unlock()
		slices.Sort(l.latencies)
		q := func(f float64) time.Duration {
			if len(l.latencies) == 0 {
				return 0
			}
			return l.latencies[min(len(l.latencies)-1, int(f*float64(len(l.latencies))))]
		}
		return result{creates: l.creates, failed: l.failed, unmutated: l.unmutated, p50: q(0.5), p99: q(0.99), errors: l.errors}
	}
}

// create creates one sandbox pod and counts what came of it.
func (l *load) create(cs kubernetes.Interface, ns string) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := cs.CoreV1().Pods(ns).Create(ctx, loadPod(ns), metav1.CreateOptions{})
	d := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.creates++
	l.latencies = append(l.latencies, d)
	switch {
	case err != nil:
		l.failed++
		l.errors[shorten(loadPodName.ReplaceAllString(err.Error(), `"load-…"`))]++
	case !mutated(p):
		l.unmutated++
	}
}

// mutated reports whether a load pod has the chart's policy's cache and the
// status annotation: with webhook.guard every pod the webhook answers has
// the annotation, so the cache is what says a policy changed it.
func mutated(p *corev1.Pod) bool {
	if p.Annotations["sandbox-webhook.io/status"] == "" {
		return false
	}
	return slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "uv-cache" && v.EmptyDir != nil })
}

// loadPodName matches a load pod's generated name in an error, so that the
// same error for different pods is counted as one.
var loadPodName = regexp.MustCompile(`"load-[a-z0-9]+"`)

func shorten(s string) string {
	if len(s) > 320 {
		return s[:320] + "…"
	}
	return s
}

// scenario is one disruption: do runs while the pods are created, and
// returns once the disruption is over (the webhook rolled out again).
type scenario struct {
	name string
	do   func(ctx context.Context) error
	// expect is what the creates must show: "none" failed or unmutated
	// (the chart's defaults), "some" (protections off: the test must see
	// them), or "any" (a measurement only).
	expect string
	// burst sends each second's creates at once (runLoad).
	burst bool
	// setup and teardown, if set, run before the creates start and after
	// they stop.
	setup, teardown func(ctx context.Context) error
}

// selectScenarios returns the steady state and the scenarios whose names
// match $CLUSTER_E2E_SCENARIOS (a regexp; all by default), the latter
// $CLUSTER_E2E_REPEAT times in turn (once by default): a focused,
// repeated measurement of what make cluster-e2e runs once.
func selectScenarios(t *testing.T, all []scenario) []scenario {
	only, err := regexp.Compile(os.Getenv("CLUSTER_E2E_SCENARIOS"))
	if err != nil {
		t.Fatalf("CLUSTER_E2E_SCENARIOS: %v", err)
	}
	repeat := 1
	if r := os.Getenv("CLUSTER_E2E_REPEAT"); r != "" {
		if repeat, err = strconv.Atoi(r); err != nil || repeat < 1 {
			t.Fatalf("CLUSTER_E2E_REPEAT=%q: want a positive number", r)
		}
	}
	var picked []scenario
	for _, s := range all[1:] {
		if only.MatchString(s.name) {
			picked = append(picked, s)
		}
	}
	out := []scenario{all[0]}
	for range repeat {
		out = append(out, picked...)
	}
	return out
}

// TestDisruption creates createsPerSecond sandbox pods a second through
// each disruption in turn and counts the creates that failed and the pods
// admitted without the mutation: zero of both with the chart's defaults.
// Then it turns the chart's rollout protections off (maxUnavailable 1, no
// surge, shutdown-delay 0) and rolls the webhook again: that must show
// failures, or the count proves nothing.
func TestDisruption(t *testing.T) {
	ns := createNamespace(t, "load")
	scenarios := []scenario{
		{name: "steady state (30 s)", do: func(ctx context.Context) error { time.Sleep(30 * time.Second); return nil }, expect: "none"},
		{name: "helm upgrade, 3 in a row (each rolls both replicas)", do: rollWithHelm, expect: "none"},
		{name: "replica pod deleted", do: deleteReplica, expect: "none"},
		{name: "replica evicted (a node drain), PDB holds the other", do: evictReplicas, expect: "none"},
		{name: "node drained (cordon, evict all, PDB holds), uncordoned, replicas spread again", do: drainNode, expect: "none"},
		{name: "node with a replica powered off (processes stopped, pods frozen, link dropped), back after", do: powerLoss, expect: "none"},
		{name: "the same power loss, creates in bursts (20 at once each second)", do: powerLoss, expect: "none", burst: true},
		{name: "the same power loss in bursts, without webhook.guard", setup: webhookValues(map[string]any{"guard": guardOff}), teardown: withValues(nil), do: powerLoss, expect: "some", burst: true},
		{name: "the same power loss in bursts, without webhook.guard, webhook.timeoutSeconds 2", setup: webhookValues(map[string]any{"guard": guardOff, "timeoutSeconds": 2}), teardown: withValues(nil), do: powerLoss, expect: "any", burst: true},
		{name: "the same power loss in bursts, without webhook.guard, 3 replicas", setup: withValues(map[string]any{"replicaCount": 3, "webhook": map[string]any{"guard": guardOff}}), teardown: withValues(nil), do: powerLoss, expect: "any", burst: true},
		{name: "the same power loss in bursts, the apiserver with --enable-aggregator-routing", setup: aggregatorRouting(true), teardown: aggregatorRouting(false), do: powerLoss, expect: "any", burst: true},
		{name: "serving certificate rotated", do: rotateServingCert, expect: "none"},
		{name: "policy ConfigMap changed", do: changePolicy, expect: "none"},
		{name: "rollout without the protections, 2 replicas (maxUnavailable 1, no surge, shutdown-delay 0, idle-drain 0)", do: unprotectedRollout(2), expect: "any"},
		{name: "rollout without the protections, 1 replica", do: unprotectedRollout(1), expect: "some"},
	}
	var rows, errs []string
	var steady time.Duration
	for _, s := range selectScenarios(t, scenarios) {
		if s.setup != nil {
			if err := s.setup(t.Context()); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		stop := runLoad(suite.cs, ns, s.burst)
		time.Sleep(3 * time.Second)
		start := time.Now()
		err := s.do(t.Context())
		took := time.Since(start)
		time.Sleep(5 * time.Second)
		r := stop()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.teardown != nil {
			if err := s.teardown(t.Context()); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		if steady == 0 {
			steady = r.p99
		}
		row := fmt.Sprintf("| %s | %s | %d | %d | %d | %s | %s | %.2f× |", s.name, took.Round(time.Second), r.creates, r.failed, r.unmutated,
			r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), float64(r.p99)/float64(steady))
		rows = append(rows, row)
		t.Log(row)
		for e, n := range r.errors {
			t.Logf("  %d× %s", n, e)
			errs = append(errs, fmt.Sprintf("- %s: %d× `%s`", s.name, n, e))
		}
		switch {
		case s.expect == "some" && r.failed+r.unmutated == 0:
			t.Errorf("%s: no failed or unmutated create among %d: the test cannot see a failure", s.name, r.creates)
		case s.expect == "none" && r.failed+r.unmutated > 0:
			t.Errorf("%s: %d failed and %d unmutated of %d creates, want none", s.name, r.failed, r.unmutated, r.creates)
		}
	}
	table := "| scenario | took | creates | failed | unmutated | p50 | p99 | p99 / steady |\n|---|---:|---:|---:|---:|---:|---:|---:|\n" + strings.Join(rows, "\n") + "\n\n" + strings.Join(errs, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(suite.dir, "disruption.md"), []byte(table), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("\n%s", table)
	for _, l := range suite.nodeLoss {
		t.Logf("power loss: %s", l)
	}
}

// rollWithHelm changes a pod annotation with helm upgrade, which rolls
// the Deployment, and waits for the rollout; three times, since what goes
// wrong in a rollout is rare (one create in several hundred).
func rollWithHelm(ctx context.Context) error {
	for range 3 {
		if _, err := upgrade(ctx, map[string]any{"podAnnotations": map[string]any{"cluster-e2e/rolled": time.Now().Format(time.RFC3339Nano)}}); err != nil {
			return err
		}
		if err := waitRollout(ctx); err != nil {
			return err
		}
	}
	return nil
}

func deleteReplica(ctx context.Context) error {
	pods, err := replicaPods(ctx)
	if err != nil {
		return err
	}
	if err := suite.cs.CoreV1().Pods(releaseNS).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return waitReplaced(ctx, pods[0].Name)
}

// evictReplicas evicts one replica through the eviction API, as kubectl
// drain does, then the other at once: the PodDisruptionBudget must refuse
// the second while the first's replacement is not ready.
func evictReplicas(ctx context.Context) error {
	pods, err := replicaPods(ctx)
	if err != nil {
		return err
	}
	evict := func(name string) error {
		return suite.cs.PolicyV1().Evictions(releaseNS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: releaseNS}})
	}
	if err := evict(pods[0].Name); err != nil {
		return fmt.Errorf("evicting %s: %w", pods[0].Name, err)
	}
	if err := evict(pods[1].Name); !apierrors.IsTooManyRequests(err) {
		return fmt.Errorf("evicting the second replica %s right after the first: %w, want 429 from the PodDisruptionBudget", pods[1].Name, err)
	}
	return waitReplaced(ctx, pods[0].Name)
}

// rotateServingCert renews the serving certificate as the rotator does
// every year (the CA kept): it puts a certificate from the Secret's CA
// that expires within the rotator's 90-day lookahead into the Secret; the
// replicas serve it at once, and the rotator replaces it with a one-year
// certificate. It returns once a replica serves a certificate other than
// the one put there.
func rotateServingCert(ctx context.Context) error {
	name := fullname + "-tls"
	sec, err := suite.cs.CoreV1().Secrets(releaseNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ca, err := testkit.ParseCA(sec.Data)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: fullname + "." + releaseNS + ".svc"},
		DNSNames:  []string{fullname + "." + releaseNS + ".svc"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}})
	if _, err := suite.cs.CoreV1().Secrets(releaseNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	// The rotator finds the 30-day certificate inside its lookahead and
	// renews it.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		s, err := suite.cs.CoreV1().Secrets(releaseNS).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if b, _ := pem.Decode(s.Data["tls.crt"]); b != nil {
				if c, err := x509.ParseCertificate(b.Bytes); err == nil && c.NotAfter.After(now.Add(300*24*time.Hour)) {
					time.Sleep(5 * time.Second) // the replicas' watches
					return nil
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return errors.New("the rotator did not renew the 30-day serving certificate within 2 minutes")
}

// changePolicy changes the served policy through the release (an extra
// environment variable) and waits until creates get it: the kubelet
// updates the mounted ConfigMap and the server reloads it.
func changePolicy(ctx context.Context) error {
	policy := `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: sandbox-seed
spec:
  mode: memory
  match:
    podSelector:
      matchLabels:
        app: sandbox
  caches:
    - name: uv-cache
      mountPath: /root/.cache/uv
      sizeLimit: 1Gi
  env:
    - name: UV_LINK_MODE
      value: copy
    - name: POLICY_GENERATION
      value: "2"
  memory:
    limit: 8Gi
`
	if _, err := upgrade(ctx, map[string]any{"policies": map[string]any{"inline": map[string]any{"sandbox-seed.yaml": policy}}}); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		p, err := suite.cs.CoreV1().Pods("probe").Create(ctx, loadPod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "POLICY_GENERATION" {
					return nil
				}
			}
		}
		time.Sleep(time.Second)
	}
	return errors.New("the changed policy was not served within 3 minutes")
}

// unprotectedRollout turns off what the chart does for rollouts, with
// replicas replicas: the strategy becomes maxUnavailable 1 with no surge
// and the server stops at once on SIGTERM (shutdown-delay 0, idle-drain 0). It patches
// the Deployment so, waits for that rollout, then rolls it again (a pod
// annotation) and waits: the second rollout is the one measured.
func unprotectedRollout(replicas int32) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		d, err := suite.cs.AppsV1().Deployments(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
		if err != nil {
			return err
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "--shutdown-delay="):
				args[i] = "--shutdown-delay=0s"
			case strings.HasPrefix(a, "--idle-drain="):
				args[i] = "--idle-drain=0s"
			}
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{
			"replicas": replicas,
			"strategy": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": 1, "maxSurge": 0}},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "webhook", "args": args}}}},
		}})
		if _, err := suite.cs.AppsV1().Deployments(releaseNS).Patch(ctx, fullname, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		if err := waitRollout(ctx); err != nil {
			return err
		}
		patch, _ = json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{"cluster-e2e/rolled": time.Now().Format(time.RFC3339Nano)}}}}})
		if _, err := suite.cs.AppsV1().Deployments(releaseNS).Patch(ctx, fullname, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		return waitRollout(ctx)
	}
}

func replicaPods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := suite.cs.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sandbox-webhook"})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, p)
		}
	}
	d, err := suite.cs.AppsV1().Deployments(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if want := int(ptr.Deref(d.Spec.Replicas, 1)); len(out) != want {
		return nil, fmt.Errorf("%d ready webhook replicas, want %d", len(out), want)
	}
	return out, nil
}

// waitReplaced waits until gone no longer exists and the Deployment's
// replicas are ready.
func waitReplaced(ctx context.Context, gone string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		_, err := suite.cs.CoreV1().Pods(releaseNS).Get(ctx, gone, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := replicaPods(ctx); err == nil {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s was not replaced by a ready replica within 3 minutes", gone)
}
