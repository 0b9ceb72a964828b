//go:build kyvernocutover

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// The cutover of docs/migrate-from-kyverno.md, walked with the real Kyverno
// admission controller (KYVERNO_ADMISSION, built by hack/kyverno.sh
// admission) enforcing the operations notes' policy, under a steady stream
// of sandbox pod creates. Run by `make kyverno-cutover`.

const (
	// cutoverNamespace is where the stream creates sandbox pods: a
	// namespace the notes' policy matches.
	cutoverNamespace = "sandboxes"
	// kyvernoNamespace is the Kyverno install's namespace (its CA and
	// serving secrets, its leader lease).
	kyvernoNamespace = "kyverno"
	// kyvernoPolicy is the notes' ClusterPolicy's name.
	kyvernoPolicy = "sandbox-uv-cache"
	// kyvernoManagedBy labels every webhook configuration Kyverno writes;
	// its chart's uninstall deletes them by it.
	kyvernoManagedBy = "webhook.kyverno.io/managed-by=kyverno"
	// kyvernoMutatingConfig is the configuration that sends pods to
	// Kyverno's mutate rules. The API server calls mutating webhooks in the
	// order of their configurations' names.
	kyvernoMutatingConfig = "kyverno-resource-mutating-webhook-cfg"
	// createsPerStep is how many creates each step of the walk sees at
	// least, at streamRate.
	createsPerStep = 60
	streamRate     = 20 // creates per second
)

var clusterPolicies = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}

// TestKyvernoCutover walks the cutover in both orders of the two webhooks:
// this webhook's configuration named to be called after Kyverno's, then
// before it. Every create of every step must be admitted, mutated as the
// notes' policy says, and hold no volume, mount or env var twice.
func TestKyvernoCutover(t *testing.T) {
	kv := newKyvernoEnv(t)
	kv.start(t)
	kv.applyPolicy(t)

	for _, order := range []struct {
		name string
		// instance names the release, and so the webhook configuration:
		// "sandbox-webhook" sorts after kyverno-…, "cutover-sandbox-webhook"
		// before it.
		instance    string
		kyvernoSees bool // Kyverno is called first
	}{
		{"kyverno first", "sandbox-webhook", true},
		{"webhook first", "cutover", false},
	} {
		t.Run(order.name, func(t *testing.T) {
			s := startStream(t)
			s.step(t, "kyverno alone", nil)

			var in *instance
			s.step(t, "webhook in shadow", func() {
				in = kv.installWebhook(t, order.instance, "shadow")
			})
			// What the guide's step 1 reads: called after Kyverno, the
			// shadow policy finds everything present; called first, it
			// counts what Kyverno has yet to do, and finds it present
			// when the API server calls it again after Kyverno's patch.
			// A decision's series appears once counted: called after
			// Kyverno, the shadow policy has none to apply.
			apply, err := testkit.Metric(in.metrics(t), "sandbox_webhook_shadow_decisions_total", "decision=apply")
			if errors.Is(err, testkit.ErrNoSeries) {
				apply = 0
			} else if err != nil {
				t.Fatal(err)
			}
			present := in.metric(t, "sandbox_webhook_shadow_decisions_total", "decision=present")
			t.Logf("shadow decisions: %v apply, %v present", apply, present)
			if present == 0 {
				t.Errorf("the shadow policy found nothing Kyverno injected present")
			}
			if order.kyvernoSees && apply != 0 {
				t.Errorf("called after Kyverno, the shadow policy would have injected %v items; want 0: Kyverno had done it all", apply)
			}
			if !order.kyvernoSees && apply == 0 {
				t.Errorf("called before Kyverno, the shadow policy counted nothing to inject: was it called first?")
			}
			beforeWebhook := s.lastCreated()

			s.step(t, "webhook enforces", func() { kv.setEnforcement(t, in, "enforce") })
			kv.checkPods(t, in, s.lastCreated(), beforeWebhook)

			s.step(t, "kyverno policy deleted", func() { kv.deletePolicy(t) })
			s.step(t, "kyverno uninstalled", func() { kv.uninstall(t) })
			s.step(t, "kyverno reinstalled", func() {
				kv.start(t)
				kv.applyPolicy(t)
			})
			s.step(t, "webhook back in shadow", func() { kv.setEnforcement(t, in, "shadow") })
			s.step(t, "webhook uninstalled", func() { in.uninstall(t) })
			s.report(t, func(step string, c created) bool { return c.err == nil && len(c.problems) == 0 })
		})
	}

	// The wrong order: the Kyverno policy deleted while the webhook is still
	// in shadow. The pods created in between are counted: a walk that could
	// not see this gap would prove nothing above.
	t.Run("kyverno policy deleted before the webhook enforces", func(t *testing.T) {
		s := startStream(t)
		s.step(t, "kyverno alone", nil)
		var in *instance
		s.step(t, "webhook in shadow", func() { in = kv.installWebhook(t, "sandbox-webhook", "shadow") })
		s.step(t, "kyverno policy deleted", func() { kv.deletePolicy(t) })
		s.step(t, "webhook enforces", func() { kv.setEnforcement(t, in, "enforce") })
		gap := s.report(t, func(step string, c created) bool {
			switch step {
			case "kyverno policy deleted", transition("kyverno policy deleted"), transition("webhook enforces"):
				return c.err == nil // the gap, counted below
			}
			return c.err == nil && len(c.problems) == 0
		})
		if gap["kyverno policy deleted"] == 0 {
			t.Errorf("no unmutated pod was counted while neither mutator applied the policy")
		}
		in.uninstall(t)
	})
}

// kyvernoEnv is the Kyverno install: its CRDs, namespace and admission
// controller process.
type kyvernoEnv struct {
	binary string
	dyn    dynamic.Interface
	dir    string
	policy []byte // the notes' ClusterPolicy
	// imported is the policy import writes for it.
	imported []byte
	cmd      *exec.Cmd
	done     chan struct{}
	logPath  string
	starts   int
}

func newKyvernoEnv(t *testing.T) *kyvernoEnv {
	t.Helper()
	binary := os.Getenv("KYVERNO_ADMISSION")
	if binary == "" {
		t.Fatal("KYVERNO_ADMISSION names no Kyverno admission controller: run `make kyverno-cutover`")
	}
	kv := &kyvernoEnv{binary: binary, dir: t.TempDir()}
	var err error
	if kv.dyn, err = dynamic.NewForConfig(suite.cp.Config); err != nil {
		t.Fatal(err)
	}
	crds := filepath.Join(filepath.Dir(binary), "crds")
	entries, err := os.ReadDir(crds)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, filepath.Join(crds, e.Name()))
	}
	if _, err := envtest.InstallCRDs(suite.cp.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing Kyverno's CRDs: %v", err)
	}
	ensureNamespace(t, kyvernoNamespace, nil)
	ensureNamespace(t, cutoverNamespace, nil)

	file := filepath.Join(suite.root, "testdata/kyverno/notes-memory.yaml")
	if kv.policy, err = os.ReadFile(file); err != nil {
		t.Fatal(err)
	}
	r, err := harness.RunCommand(t.Context(), suite.cli, "import", "kyverno", file)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("import kyverno %s: exit %d, %v\n%s", file, r.ExitCode, err, r.Stderr)
	}
	kv.imported = r.Stdout
	t.Cleanup(func() { kv.stop(t) })
	return kv
}

// start runs the admission controller out of cluster, as Kyverno's own
// development setup does (--serverIP: its webhook configurations call it
// by URL), and waits until its mutating configuration exists.
func (kv *kyvernoEnv) start(t *testing.T) {
	t.Helper()
	kv.starts++
	port := testkit.FreePort(t)
	kv.logPath = filepath.Join(kv.dir, fmt.Sprintf("kyverno-%d.log", kv.starts))
	logFile := createLog(t, kv.logPath)
	kv.cmd = exec.Command(kv.binary,
		"--kubeconfig", suite.kubeconfig,
		"--serverIP", fmt.Sprintf("127.0.0.1:%d", port),
		"--webhookServerHost", "127.0.0.1",
		"--webhookServerPort", fmt.Sprint(port),
		"--caSecretName", "kyverno-svc.kyverno.svc.kyverno-tls-ca",
		"--tlsSecretName", "kyverno-svc.kyverno.svc.kyverno-tls-pair",
		"--disableMetrics",
		"--controllerRuntimeMetricsAddress", "0",
		"--loggingFormat", "json",
		"--disableLogColor",
		"--autoMemLimitEnabled=false",
	)
	// What Kyverno's chart sets on its admission controller's pod.
	kv.cmd.Env = append(os.Environ(),
		"KYVERNO_NAMESPACE="+kyvernoNamespace,
		"KYVERNO_SERVICEACCOUNT_NAME=kyverno-admission-controller",
		"KYVERNO_DEPLOYMENT=kyverno-admission-controller",
		"KYVERNO_POD_NAME=kyverno-admission-controller-e2e",
		"KYVERNO_SVC=kyverno-svc",
		"INIT_CONFIG=kyverno",
		"METRICS_CONFIG=kyverno-metrics",
	)
	kv.cmd.Stdout, kv.cmd.Stderr = logFile, logFile
	kv.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := kv.cmd.Start(); err != nil {
		t.Fatalf("starting Kyverno: %v", err)
	}
	kv.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(kv.cmd, kv.done)

	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), kyvernoMutatingConfig, metav1.GetOptions{})
		if err == nil {
			return
		}
		select {
		case <-kv.done:
			t.Fatalf("Kyverno exited before it registered its webhooks (log %s)", kv.logPath)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kyverno registered no %s in 3 minutes: %v", kyvernoMutatingConfig, err)
		}
	}
}

// stop ends the admission controller (SIGTERM, as a rollout does).
func (kv *kyvernoEnv) stop(t *testing.T) {
	t.Helper()
	if kv.cmd == nil {
		return
	}
	_ = kv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-kv.done:
	case <-time.After(30 * time.Second):
		_ = kv.cmd.Process.Kill()
		<-kv.done
	}
	kv.cmd = nil
}

// uninstall is Kyverno's chart uninstalled: the controller gone, then its
// webhook configurations deleted by their label, as the chart's hook does,
// and the reports it left in etcd cleared.
func (kv *kyvernoEnv) uninstall(t *testing.T) {
	t.Helper()
	kv.stop(t)
	ctx := t.Context()
	opts := metav1.ListOptions{LabelSelector: kyvernoManagedBy}
	if err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().DeleteCollection(ctx, metav1.DeleteOptions{}, opts); err != nil {
		t.Fatal(err)
	}
	if err := suite.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().DeleteCollection(ctx, metav1.DeleteOptions{}, opts); err != nil {
		t.Fatal(err)
	}
	for _, r := range []schema.GroupVersionResource{
		{Group: "reports.kyverno.io", Version: "v1", Resource: "ephemeralreports"},
		{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"},
	} {
		list, err := kv.dyn.Resource(r).Namespace(cutoverNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing %s: %v", r.Resource, err)
		}
		if err := kv.dyn.Resource(r).Namespace(cutoverNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatalf("deleting %s: %v", r.Resource, err)
		}
		t.Logf("Kyverno uninstalled: %d %s cleared from %s", len(list.Items), r.Resource, cutoverNamespace)
	}
}

// applyPolicy creates the notes' ClusterPolicy (retrying while Kyverno's
// policy webhook is not yet called) and waits until Kyverno mutates a
// dry-run sandbox pod with it.
func (kv *kyvernoEnv) applyPolicy(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(kv.policy, &obj.Object); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "Kyverno to accept the notes' policy", time.Minute, func() error {
		_, err := kv.dyn.Resource(clusterPolicies).Create(ctx, &obj, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	testkit.WaitFor(t, "Kyverno to mutate sandbox pods", time.Minute, func() error {
		got, err := suite.cs.CoreV1().Pods(cutoverNamespace).Create(ctx, testkit.SandboxPod(cutoverNamespace, "kyverno-probe", sleeping), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if p := notesProblems(got); len(p) > 0 {
			return errors.New(strings.Join(p, "; "))
		}
		return nil
	})
}

// deletePolicy deletes the notes' ClusterPolicy, as step 3 of the guide.
func (kv *kyvernoEnv) deletePolicy(t *testing.T) {
	t.Helper()
	if err := kv.dyn.Resource(clusterPolicies).Delete(t.Context(), kyvernoPolicy, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// installWebhook starts this webhook with the import of the notes' policy
// at the given enforcement, scoped to the stream's namespace, and waits
// until the API server sends it that namespace's pods.
func (kv *kyvernoEnv) installWebhook(t *testing.T, name, enforcement string) *instance {
	t.Helper()
	in := newInstance(t, name, instanceOptions{
		policies:   map[string][]byte{"sandbox-uv-cache.yaml": kv.withEnforcement(t, enforcement)},
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: cutoverNamespace}}},
		noProbe:    true,
	})
	testkit.WaitFor(t, "the API server to send the webhook sandbox pods", time.Minute, func() error {
		_, err := suite.cs.CoreV1().Pods(cutoverNamespace).Create(t.Context(), testkit.SandboxPod(cutoverNamespace, "webhook-probe", sleeping), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if n := in.metric(t, "sandbox_webhook_admission_requests_total"); n == 0 {
			return fmt.Errorf("%v reviews", n)
		}
		return nil
	})
	return in
}

// setEnforcement rewrites the policy file with enforcement and waits until
// the webhook serves it.
func (kv *kyvernoEnv) setEnforcement(t *testing.T, in *instance, enforcement string) {
	t.Helper()
	reloads := in.metric(t, "sandbox_webhook_policy_reloads_total")
	if err := in.policies.Update(map[string][]byte{"sandbox-uv-cache.yaml": kv.withEnforcement(t, enforcement)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the webhook to load the policy in "+enforcement, time.Minute, func() error {
		if n := in.metric(t, "sandbox_webhook_policy_reloads_total"); n <= reloads {
			return fmt.Errorf("%v reloads", n)
		}
		return nil
	})
}

// withEnforcement is the imported policy with spec.enforcement set.
func (kv *kyvernoEnv) withEnforcement(t *testing.T, enforcement string) []byte {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(kv.imported, &doc); err != nil {
		t.Fatal(err)
	}
	doc["spec"].(map[string]any)["enforcement"] = enforcement
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkPods runs `check pod` on a pod created while both enforce, which
// must report everything injected or present, and on one Kyverno alone
// mutated, which must name another mutator.
func (kv *kyvernoEnv) checkPods(t *testing.T, in *instance, both, kyvernoOnly string) {
	t.Helper()
	check := func(pod string) harness.Result {
		r, err := harness.RunCommand(t.Context(), suite.cli, "check", "pod", pod, "-n", cutoverNamespace,
			"--kubeconfig", suite.kubeconfig, "--configuration", in.mwc.Name, "--policy", in.policies.Dir)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := check(both); r.ExitCode != 0 {
		t.Errorf("check pod %s (created while both enforce): exit %d, want 0\n%s%s", both, r.ExitCode, r.Stdout, r.Stderr)
	}
	r := check(kyvernoOnly)
	if r.ExitCode != 4 || !strings.Contains(string(r.Stdout), "another mutator") {
		t.Errorf("check pod %s (Kyverno alone mutated it): exit %d, want 4 and another mutator named\n%s%s", kyvernoOnly, r.ExitCode, r.Stdout, r.Stderr)
	}
}

// uninstall is the chart uninstalled: the configuration deleted, then the
// server stopped.
func (in *instance) uninstall(t *testing.T) {
	t.Helper()
	err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(t.Context(), in.mwc.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := in.webhook.Stop(); err != nil {
		t.Fatal(err)
	}
}

// notesProblems says how pod differs from what the notes' policy gives a
// sandbox pod: the uv cache in memory, 1Gi, mounted once in every
// container; UV_LINK_MODE=copy once in every container; a pod-level memory
// limit of 8Gi (where the API server keeps pod-level resources). Any
// volume, mount path or env name held twice is a problem too.
func notesProblems(pod *corev1.Pod) []string {
	var p []string
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		if _, dup := volumes[v.Name]; dup {
			p = append(p, "volume "+v.Name+" twice")
		}
		volumes[v.Name] = v
	}
	size := resource.MustParse("1Gi")
	for _, c := range pod.Spec.Containers {
		mounts, env := map[string]corev1.VolumeMount{}, map[string]int{}
		for _, m := range c.VolumeMounts {
			if _, dup := mounts[m.MountPath]; dup {
				p = append(p, fmt.Sprintf("container %s: mount path %s twice", c.Name, m.MountPath))
			}
			mounts[m.MountPath] = m
		}
		for _, e := range c.Env {
			env[e.Name]++
			if env[e.Name] == 2 {
				p = append(p, fmt.Sprintf("container %s: env %s twice", c.Name, e.Name))
			}
			if e.Name == "UV_LINK_MODE" && e.Value != "copy" {
				p = append(p, fmt.Sprintf("container %s: UV_LINK_MODE=%s", c.Name, e.Value))
			}
		}
		if env["UV_LINK_MODE"] == 0 {
			p = append(p, fmt.Sprintf("container %s: no UV_LINK_MODE", c.Name))
		}
		m, ok := mounts[uvMountPath]
		if !ok {
			p = append(p, fmt.Sprintf("container %s: nothing at %s", c.Name, uvMountPath))
			continue
		}
		v := volumes[m.Name]
		if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(size) != 0 {
			p = append(p, fmt.Sprintf("container %s: %s is volume %q, not a 1Gi memory emptyDir", c.Name, uvMountPath, m.Name))
		}
	}
	if !suite.podLevelDropped {
		limit := resource.MustParse("8Gi")
		if pod.Spec.Resources == nil || pod.Spec.Resources.Limits.Memory().Cmp(limit) != 0 {
			p = append(p, "no pod-level memory limit of 8Gi")
		}
	}
	return p
}

// created is one create of the stream.
type created struct {
	name     string
	err      error
	problems []string
}

// stream creates sandbox pods at streamRate from startStream until report,
// recording each under the step the walk was in when it was sent.
type stream struct {
	t      *testing.T
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	current string
	steps   []string
	results map[string][]created
	last    string // the last pod created without error
}

func startStream(t *testing.T) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{t: t, cancel: cancel, results: map[string][]created{}}
	prefix := fmt.Sprintf("s%d-", time.Now().UnixNano()%1e6)
	s.wg.Go(func() {
		tick := time.NewTicker(time.Second / streamRate)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s.mu.Lock()
			step := s.current
			s.mu.Unlock()
			if step == "" {
				continue
			}
			name := fmt.Sprintf("%s%05d", prefix, i)
			s.wg.Go(func() {
				c := created{name: name}
				cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
				defer ccancel()
				got, err := suite.cs.CoreV1().Pods(cutoverNamespace).Create(cctx, testkit.SandboxPod(cutoverNamespace, name, sleeping), metav1.CreateOptions{})
				if err != nil {
					c.err = err
				} else {
					c.problems = notesProblems(got)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				s.results[step] = append(s.results[step], c)
				if err == nil {
					s.last = name
				}
			})
		}
	})
	t.Cleanup(s.stop)
	return s
}

func (s *stream) stop() {
	s.cancel()
	s.wg.Wait()
}

// transition names the creates sent while a step's change is being made.
func transition(step string) string { return "→ " + step }

// step enters a step of the walk: do (if any) runs while the stream goes
// on, its creates counted under transition(name); then the step lasts until
// createsPerStep of its own creates have returned.
func (s *stream) step(t *testing.T, name string, do func()) {
	t.Helper()
	enter := func(step string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.current = step
		s.steps = append(s.steps, step)
	}
	start := time.Now()
	if do != nil {
		enter(transition(name))
		do()
	}
	enter(name)
	testkit.WaitFor(t, fmt.Sprintf("%d creates in step %q", createsPerStep, name), time.Minute, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if n := len(s.results[name]); n < createsPerStep {
			return fmt.Errorf("%d creates", n)
		}
		return nil
	})
	t.Logf("step %q: %s", name, time.Since(start).Round(time.Millisecond))
}

// lastCreated is the last pod created without error.
func (s *stream) lastCreated() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// report stops the stream and logs, per step, the creates that failed and
// those admitted with problems; a create ok does not accept fails the test.
// It returns the number of creates per step that failed or had problems.
func (s *stream) report(t *testing.T, ok func(step string, c created) bool) map[string]int {
	t.Helper()
	s.stop()
	bad := map[string]int{}
	var total, totalFailed, totalProblems int
	for _, step := range s.steps {
		var failed, problems int
		var first []string
		for _, c := range s.results[step] {
			switch {
			case c.err != nil:
				failed++
			case len(c.problems) > 0:
				problems++
			default:
				continue
			}
			bad[step]++
			if len(first) < 3 {
				why := strings.Join(c.problems, "; ")
				if c.err != nil {
					why = c.err.Error()
				}
				first = append(first, c.name+": "+why)
			}
			if !ok(step, c) {
				t.Fail()
			}
		}
		t.Logf("%-28s %4d creates, %d failed, %d unmutated or duplicated %s", step, len(s.results[step]), failed, problems, strings.Join(first, " | "))
		total, totalFailed, totalProblems = total+len(s.results[step]), totalFailed+failed, totalProblems+problems
	}
	t.Logf("%-28s %4d creates, %d failed, %d unmutated or duplicated", "all steps", total, totalFailed, totalProblems)
	if t.Failed() {
		t.Errorf("creates failed or were not mutated as the notes' policy says (see the steps above)")
	}
	return bad
}
