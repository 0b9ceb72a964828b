package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

type options struct {
	once                      bool
	dir, webhook, cli, assets string
	// explore, when set, runs once the summary is printed, before --once
	// stops everything: the test runs the printed commands through it.
	explore func(summary string) error
}

const (
	// ownNamespace is the webhook's release namespace, excluded from mutation.
	ownNamespace = "sandbox-webhook"
	// Where the example pods go: no Pod Security level (hostPath allowed),
	// and baseline (the asset comes from its image source).
	sandboxNS  = "sandboxes"
	baselineNS = "sandboxes-baseline"
)

// demoPod is one pod the demo creates.
type demoPod struct {
	source string // the example file
	note   string
	pod    *corev1.Pod
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	root, err := harness.RepoRoot(".")
	if err != nil {
		return fmt.Errorf("run the demo from the repository (make demo): %w", err)
	}
	if o.dir == "" {
		o.dir = filepath.Join(root, "_output", "demo")
	}
	if o.webhook == "" {
		o.webhook = filepath.Join(root, "bin", "sandbox-webhook")
	}
	if o.cli == "" {
		o.cli = filepath.Join(root, "bin", "kubectl-sandbox_webhook")
	}
	if o.assets == "" {
		o.assets = filepath.Join(root, "bin")
	}
	if _, err := os.Stat(o.webhook); err != nil {
		return fmt.Errorf("%s: run make demo, which builds it", o.webhook)
	}
	if err := harness.CheckAssets(o.assets); err != nil {
		return err
	}
	pods, err := examplePods(root)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.dir, "pods"), 0o755); err != nil {
		return err
	}
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}

	// Everything started is stopped on the way out, in reverse order, even
	// when a second Ctrl-C arrives while stopping.
	var stops []func() error
	defer func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(sig)
		if len(stops) > 0 {
			fmt.Fprintln(out, "\nStopping the webhook, kube-apiserver and etcd…")
		}
		for i := len(stops) - 1; i >= 0; i-- {
			err = errors.Join(err, stops[i]())
		}
		if len(stops) > 0 && err == nil {
			fmt.Fprintln(out, "Stopped; nothing is left running.")
		}
	}()

	fmt.Fprintf(out, "sandbox-webhook demo: a local kube-apiserver %s with the webhook in front of it\n\n", harness.KubeVersion)

	done := newStep(out, "Starting kube-apiserver and etcd")
	cpLog, err := os.Create(filepath.Join(o.dir, "controlplane.log"))
	if err != nil {
		return err
	}
	defer cpLog.Close()
	cp, err := harness.StartControlPlane(o.assets, cpLog)
	if err != nil {
		return done.fail(err)
	}
	stops = append(stops, cp.Stop)
	kubeconfig := filepath.Join(o.dir, "kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig); err != nil {
		return done.fail(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return done.fail(err)
	}
	done.ok()

	done = newStep(out, "Generating a CA and serving certificate (sandbox-webhook certs generate)")
	certs, err := harness.NewCerts(ctx, o.webhook, filepath.Join(o.dir, "tls"), "127.0.0.1")
	if err != nil {
		return done.fail(err)
	}
	done.ok()

	done = newStep(out, "Starting sandbox-webhook serve with examples/policies/memory")
	policyDir := filepath.Join(o.dir, "policies")
	if err := copyDir(filepath.Join(root, "examples", "policies", "memory"), policyDir); err != nil {
		return done.fail(err)
	}
	// The leak-mitigation file has a directory of its own, as in a pod's
	// ConfigMap mount: the server watches the directory of each file it
	// reloads, and the logs below are written elsewhere.
	leakFile := filepath.Join(o.dir, "config", "leak-mitigation")
	if err := os.MkdirAll(filepath.Dir(leakFile), 0o755); err != nil {
		return done.fail(err)
	}
	if err := os.WriteFile(leakFile, []byte("policy\n"), 0o644); err != nil {
		return done.fail(err)
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: ownNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: sandboxNS}},
		{ObjectMeta: metav1.ObjectMeta{Name: baselineNS, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return done.fail(err)
		}
	}
	webhookLog, err := os.Create(filepath.Join(o.dir, "webhook.log"))
	if err != nil {
		return done.fail(err)
	}
	defer webhookLog.Close()
	wh, err := harness.StartWebhook(ctx, harness.WebhookOptions{
		Binary:             o.webhook,
		Kubeconfig:         kubeconfig,
		CertDir:            certs.Dir(),
		Policies:           []string{policyDir},
		LeakMitigationFile: leakFile,
		ExcludeNamespaces:  []string{ownNamespace},
		// --status-always, as the chart's Deployment runs it with its
		// default webhook.guard.
		Args: []string{"--shutdown-delay", "0s", "--log-level", "debug", "--status-always"},
		Log:  webhookLog,
	})
	if err != nil {
		return done.fail(err)
	}
	stops = append(stops, wh.Stop)
	done.ok()

	done = newStep(out, "Installing the chart's admission objects with its defaults: the MutatingWebhookConfiguration (webhook.url → the local process) and webhook.guard's policies")
	adm, err := chart.RenderAdmission(ctx, root, chart.ConfigOptions{
		Release:   "sandbox-webhook",
		Namespace: ownNamespace,
		URL:       wh.URL(),
		CABundle:  certs.Current().CA,
	})
	if err != nil {
		return done.fail(err)
	}
	if _, err := chart.InstallGuard(ctx, cs, adm); err != nil {
		return done.fail(err)
	}
	if err := chart.InstallWebhookConfiguration(ctx, cs, adm.Webhooks); err != nil {
		return done.fail(err)
	}
	if err := harness.WaitMutating(ctx, cs, testkit.SandboxPod(sandboxNS, "probe", testkit.Image("busybox:1.37")), true); err != nil {
		return done.fail(err)
	}
	done.ok()

	// A client that keeps the warnings the apiserver passes on, as kubectl
	// prints them.
	var warned warningLog
	cfg := *cp.Config
	cfg.WarningHandler = &warned
	wcs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nCreating the example pods through the apiserver:")
	var firstSandbox string
	for _, d := range pods {
		warned.take()
		stored, err := wcs.CoreV1().Pods(d.pod.Namespace).Create(ctx, d.pod.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating %s from %s: %w", d.pod.Namespace+"/"+podName(d.pod), d.source, err)
		}
		stored.APIVersion, stored.Kind = "v1", "Pod"
		b, err := yaml.Marshal(stored)
		if err != nil {
			return err
		}
		yamlPath := filepath.Join(o.dir, "pods", stored.Namespace+"."+stored.Name+".yaml")
		if err := os.WriteFile(yamlPath, b, 0o644); err != nil {
			return err
		}
		summarize(out, d, stored, warned.take(), rel(yamlPath))
		if firstSandbox == "" && harness.Mutated(stored) {
			firstSandbox = stored.Namespace + " " + stored.Name
		}
	}

	kubectl, hint := "kubectl", ""
	if _, err := os.Stat(filepath.Join(root, "bin", "kubectl")); err == nil {
		kubectl = "bin/kubectl"
	} else if _, err := exec.LookPath("kubectl"); err != nil {
		hint = "  (no kubectl here: bash hack/tools.sh kubectl builds bin/kubectl)\n"
	}
	k := fmt.Sprintf("%s --kubeconfig %s", kubectl, rel(kubeconfig))
	cli := rel(o.cli)
	if _, err := os.Stat(o.cli); err != nil {
		hint += fmt.Sprintf("  (no %s here: make build-cli builds it)\n", cli)
	}
	firstNS, firstName, _ := strings.Cut(firstSandbox, " ")
	status := fmt.Sprintf("http://127.0.0.1:%d/status", wh.HealthPort)
	checkFlags := fmt.Sprintf("--kubeconfig %s --policy %s --status-url %s", rel(kubeconfig), rel(policyDir), status)
	var summary strings.Builder
	fmt.Fprintf(&summary, `
While it runs, the cluster is yours to explore (pods are stored, not run: there is no kubelet):
%s  %s get pods -A -L app
  %s get pod -n %s %s -o yaml
  %s create -n %s -f examples/pods/sandbox.yaml -o yaml
The command line (kubectl sandbox-webhook, once %s is on your PATH) against it:
  %s check pod %s -n %s %s
  %s check install %s
  %s dry-run --policy %s -f examples/pods/sandbox.yaml -o diff
Policies:        %s/ (edit them: reloaded without a restart)
Leak-mitigation: echo on > %s   (disk-backed caches for pods created afterwards)
Server status:   curl %s (the policy set and mode it serves)
Logs:            %s (one line per decision), %s
`, hint, k, k, firstNS, firstName, k, sandboxNS, filepath.Base(o.cli), cli, firstName, firstNS, checkFlags, cli, checkFlags, cli, rel(policyDir),
		rel(policyDir), rel(leakFile), status, rel(webhookLog.Name()), rel(cpLog.Name()))
	fmt.Fprint(out, summary.String())

	if o.explore != nil {
		if err := o.explore(summary.String()); err != nil {
			return err
		}
	}
	if o.once {
		fmt.Fprintln(out, "\n--once: stopping everything (make demo keeps it running until Ctrl-C).")
		return nil
	}
	fmt.Fprintln(out, "\nPress Ctrl-C to stop everything.")
	<-ctx.Done()
	return nil
}

// examplePods reads examples/pods: every Pod, one pod from each workload's
// template (there is no controller-manager to create them), and the first
// sandbox pod again in a namespace that enforces Pod Security baseline.
// Sandbox pods come first, the others (never sent to the webhook) last.
func examplePods(root string) ([]demoPod, error) {
	files, err := filepath.Glob(filepath.Join(root, "examples", "pods", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no example pods in examples/pods")
	}
	slices.Sort(files)
	var sandboxes, others []demoPod
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := harness.DecodeObjects(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		src := filepath.Join("examples", "pods", filepath.Base(f))
		for _, raw := range objs {
			pod, note, err := podOf(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			if pod == nil {
				continue
			}
			pod.Namespace = sandboxNS
			d := demoPod{source: src, note: note, pod: pod}
			if pod.Labels["app"] == "sandbox" {
				sandboxes = append(sandboxes, d)
			} else {
				others = append(others, d)
			}
		}
	}
	// The plain sandbox pod (examples/pods/sandbox.yaml) first, then the
	// other pods, then pods made from workload templates.
	rank := func(d demoPod) int {
		switch {
		case filepath.Base(d.source) == "sandbox.yaml":
			return 0
		case d.note == "":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(sandboxes, func(a, b demoPod) int { return rank(a) - rank(b) })
	if len(sandboxes) == 0 {
		return nil, errors.New("examples/pods holds no sandbox pod (label app=sandbox)")
	}
	baseline := sandboxes[0]
	baseline.pod = baseline.pod.DeepCopy()
	baseline.pod.Namespace = baselineNS
	baseline.note = "in a namespace enforcing Pod Security baseline: the asset comes from its image"
	return append(append(sandboxes, baseline), others...), nil
}

// podOf returns the pod a manifest stands for: a Pod itself, or a pod made
// from a workload's template the way its controller would.
func podOf(raw []byte) (*corev1.Pod, string, error) {
	var meta struct {
		metav1.TypeMeta
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Template    *corev1.PodTemplateSpec `json:"template"`
			JobTemplate *struct {
				Spec struct {
					Template *corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			} `json:"jobTemplate"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, "", err
	}
	if meta.Kind == "Pod" {
		pod := &corev1.Pod{}
		return pod, "", json.Unmarshal(raw, pod)
	}
	tmpl := meta.Spec.Template
	if meta.Spec.JobTemplate != nil {
		tmpl = meta.Spec.JobTemplate.Spec.Template
	}
	if tmpl == nil {
		return nil, "", nil
	}
	pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pod.GenerateName = meta.Metadata.Name + "-"
	return pod, fmt.Sprintf("a pod of %s %s, made from its template as its controller would", meta.Kind, meta.Metadata.Name), nil
}

// summarize prints what the webhook added to one pod.
func summarize(out io.Writer, d demoPod, stored *corev1.Pod, warnings []string, yamlPath string) {
	in := d.pod
	fmt.Fprintf(out, "\nPod %s/%s  (%s)\n", stored.Namespace, stored.Name, d.source)
	if d.note != "" {
		fmt.Fprintf(out, "  %s\n", d.note)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }

	status, ok := stored.Annotations[mutate.StatusAnnotation]
	if !ok {
		row("untouched", "not a sandbox pod (no app=sandbox label): the apiserver never sent it to the webhook")
		tw.Flush()
		fmt.Fprintf(out, "  full YAML   %s\n", yamlPath)
		return
	}
	var st struct {
		Policies []struct {
			Name, Mode string
			Injected   []string
			Skipped    []string
		}
		Converted []string
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		row("status", status)
	}
	row("status", mutate.StatusAnnotation+" annotation:")
	for _, p := range st.Policies {
		row("  policy", fmt.Sprintf("%s (%s mode): %s", p.Name, p.Mode, strings.Join(p.Injected, ", ")))
		for _, s := range p.Skipped {
			row("  skipped", s)
		}
	}

	had := map[string]bool{}
	for _, v := range in.Spec.Volumes {
		had[v.Name] = true
	}
	first := true
	for _, v := range stored.Spec.Volumes {
		if had[v.Name] {
			continue
		}
		k := ""
		if first {
			k, first = "volumes", false
		}
		row(k, "+ "+v.Name+"  "+describeVolume(v))
	}

	inC := map[string]corev1.Container{}
	for _, c := range append(append([]corev1.Container{}, in.Spec.InitContainers...), in.Spec.Containers...) {
		inC[c.Name] = c
	}
	var mounts, env []string
	for _, c := range append(append([]corev1.Container{}, stored.Spec.InitContainers...), stored.Spec.Containers...) {
		before := inC[c.Name]
		var m, e []string
		for _, vm := range c.VolumeMounts {
			if !slices.ContainsFunc(before.VolumeMounts, func(x corev1.VolumeMount) bool { return x.MountPath == vm.MountPath }) {
				s := vm.MountPath + " (" + vm.Name
				if vm.ReadOnly {
					s += ", read-only"
				}
				m = append(m, s+")")
			}
		}
		for _, ev := range c.Env {
			if !slices.ContainsFunc(before.Env, func(x corev1.EnvVar) bool { return x.Name == ev.Name }) {
				e = append(e, ev.Name+"="+ev.Value)
			}
		}
		if len(m) > 0 {
			mounts = append(mounts, c.Name+": + "+strings.Join(m, ", + "))
		}
		if len(e) > 0 {
			env = append(env, c.Name+": + "+strings.Join(e, ", + "))
		}
	}
	for i, s := range mounts {
		row(map[bool]string{true: "mounts"}[i == 0], s)
	}
	for i, s := range env {
		row(map[bool]string{true: "env"}[i == 0], s)
	}
	for _, s := range st.Converted {
		row("converted", s)
	}
	if r := stored.Spec.Resources; r != nil {
		req := r.Requests.Memory().String()
		if r.Requests.Memory().IsZero() {
			// Set, not missing: without it the request would default to the limit.
			req = "0 (set: a missing one would default to the limit)"
		}
		row("pod memory", fmt.Sprintf("limit %s, request %s", r.Limits.Memory(), req))
	}
	for i, w := range warnings {
		row(map[bool]string{true: "warnings"}[i == 0], w)
	}
	tw.Flush()
	fmt.Fprintf(out, "  full YAML   %s\n", yamlPath)
}

func describeVolume(v corev1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		medium := "disk"
		if v.EmptyDir.Medium == corev1.StorageMediumMemory {
			medium = "Memory (tmpfs)"
		}
		s := "emptyDir, medium " + medium
		if v.EmptyDir.SizeLimit != nil {
			s += ", sizeLimit " + v.EmptyDir.SizeLimit.String()
		}
		return s
	case v.HostPath != nil:
		s := "hostPath " + v.HostPath.Path
		if v.HostPath.Type != nil {
			s += " (type " + string(*v.HostPath.Type) + ")"
		}
		return s
	case v.Image != nil:
		return "image " + v.Image.Reference
	}
	return "volume"
}

// step prints "label… ok (1.2s)" or "label… failed".
type step struct {
	out   io.Writer
	start time.Time
}

func newStep(out io.Writer, label string) step {
	fmt.Fprintf(out, "  %s… ", label)
	return step{out: out, start: time.Now()}
}

func (s step) ok() {
	fmt.Fprintf(s.out, "ok (%s)\n", time.Since(s.start).Round(100*time.Millisecond))
}

func (s step) fail(err error) error {
	fmt.Fprintln(s.out, "failed")
	return err
}

type warningLog struct {
	mu   sync.Mutex
	text []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.text
	w.text = nil
	return t
}

func podName(pod *corev1.Pod) string {
	if pod.Name == "" {
		return pod.GenerateName + "*"
	}
	return pod.Name
}

func copyDir(src, dst string) error {
	files, err := harness.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
