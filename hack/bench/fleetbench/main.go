// Command fleetbench measures dry-run at fleet scale: it writes a List of
// pods and workloads shaped like the benchmark corpus (a kubectl get
// pods,deploy,jobs -A -o yaml dump), runs the dry-run binary on it once per
// output format and reports wall time, CPU per object and peak RSS, next to
// the admission handler's CPU per review measured in the same run.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func main() {
	binary := flag.String("binary", filepath.Join(benchdata.Root(), "bin", "kubectl-sandbox_webhook"), "the command line binary to measure (make build-cli)")
	sizes := flag.String("objects", "1000,10000", "comma-separated List sizes")
	formats := flag.String("formats", "yaml,json,patch,summary,yaml --predict", "comma-separated output formats; \"F --predict\" adds --predict")
	out := flag.String("out", "", "write the Markdown report here as well as to stdout")
	keep := flag.String("keep", "", "write the generated inputs into this directory and keep them")
	shapes := flag.String("shapes", "corpus,kubectl", "comma-separated input shapes: corpus (the objects as the apiserver sends them to the webhook, managedFields included), kubectl (as kubectl get -o yaml prints them: no managedFields, pods with a running status)")
	flag.Parse()
	if err := run(*binary, *sizes, *formats, *shapes, *out, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

func run(binary, sizes, formats, shapes, out, keep string) error {
	dir := keep
	if dir == "" {
		d, err := os.MkdirTemp("", "fleetbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	policies := filepath.Join(benchdata.Root(), benchdata.SeedPolicies)
	handlerCPU, err := handlerCPUPerReview(2000)
	if err != nil {
		return err
	}
	var report bytes.Buffer
	fmt.Fprintf(&report, "## dry-run at fleet scale (go run ./hack/bench/fleetbench)\n\n")
	fmt.Fprintf(&report, "A List of pods and workloads in the benchmark corpus's shapes (85%% typical sandbox pods, 5%% large, 5%% non-matching, 5%% Deployments and Jobs), the seed policy. Shape corpus: the objects as the apiserver sends them to the webhook, managedFields included; shape kubectl: as kubectl get -o yaml prints them, without managedFields, pods with a running status. The admission handler's CPU per review in the same run: %s (the target is CPU per object within 5x of it).\n\n", fmtDur(handlerCPU))
	fmt.Fprintf(&report, "| objects | shape | input | per object | output | wall | CPU | CPU/object | x handler | peak RSS |\n|---:|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, shape := range strings.Split(shapes, ",") {
		if shape != "corpus" && shape != "kubectl" {
			return fmt.Errorf("--shapes: %q is not corpus or kubectl", shape)
		}
		if err := runShape(&report, binary, sizes, formats, shape, dir, policies, handlerCPU); err != nil {
			return err
		}
	}
	fmt.Fprintf(&report, "\nKyverno CLI 1.19.1 (`kyverno apply`, measured on the same machine class): the seed policy on 25 pods took 1.6 s of CPU and 275 MB peak RSS.\n")
	os.Stdout.Write(report.Bytes())
	if out != "" {
		return os.WriteFile(out, report.Bytes(), 0o644)
	}
	return nil
}

// runShape measures every size and format on inputs of one shape.
func runShape(report *bytes.Buffer, binary, sizes, formats, shape, dir, policies string, handlerCPU time.Duration) error {
	for _, s := range strings.Split(sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil {
			return fmt.Errorf("--objects %q: %w", s, err)
		}
		input := filepath.Join(dir, fmt.Sprintf("fleet-%s-%d.yaml", shape, n))
		size, err := writeFleet(input, n, shape == "kubectl")
		if err != nil {
			return err
		}
		for _, f := range strings.Split(formats, ",") {
			fields := strings.Fields(f)
			args := []string{"dry-run", "-p", policies, "-f", input, "-o", fields[0]}
			args = append(args, fields[1:]...)
			m, err := measure(binary, args)
			if err != nil {
				return fmt.Errorf("%s %s: %w", binary, strings.Join(args, " "), err)
			}
			perObj := m.cpu / time.Duration(n)
			fmt.Fprintf(report, "| %d | %s | %.1f MB | %.1f KB | %s | %.2f s | %.2f s | %s | %.1f | %.0f MiB |\n",
				n, shape, float64(size)/1e6, float64(size)/float64(n)/1e3, f, m.wall.Seconds(), m.cpu.Seconds(), fmtDur(perObj),
				float64(perObj)/float64(handlerCPU), float64(m.maxRSS)/(1<<20))
		}
	}
	return nil
}

type measurement struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
}

// measure runs the binary once, its output discarded, and reads its CPU time
// and peak RSS from the kernel's accounting. Exit code 3 (--predict predicts a
// rejection) counts as a run.
func measure(binary string, args []string) (measurement, error) {
	cmd := exec.Command(binary, args...)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &tail{buf: &stderr}
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			return measurement{}, fmt.Errorf("%w: %s", err, stderr.String())
		}
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return measurement{wall: wall, cpu: cpu, maxRSS: ru.Maxrss * 1024}, nil
}

// tail keeps the last 4 KB written to it.
type tail struct{ buf *bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > 4096 {
		b := append([]byte(nil), t.buf.Bytes()[t.buf.Len()-4096:]...)
		t.buf.Reset()
		t.buf.Write(b)
	}
	return len(p), nil
}

// writeFleet writes a v1 List of n objects as kubectl get -o yaml does and
// returns its size in bytes; asKubectl gives the objects the shape kubectl
// prints (see kubectlShape). The bufio.Writer keeps the first write error,
// which Flush returns.
func writeFleet(path string, n int, asKubectl bool) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "apiVersion: v1\nitems:")
	typical, large, other := benchdata.TypicalPod(), benchdata.LargePod(), benchdata.NonMatchingPod()
	for i := range n {
		var obj any
		switch i % 20 {
		case 1:
			p := large.DeepCopy()
			p.Name = fmt.Sprintf("%s-%05d", large.Name, i)
			obj = p
		case 2:
			p := other.DeepCopy()
			p.Name = fmt.Sprintf("%s-%05d", other.Name, i)
			obj = p
		case 3:
			obj = deployment(typical, i)
		case 4:
			obj = job(typical, i)
		default:
			p := typical.DeepCopy()
			p.Name = fmt.Sprintf("sandbox-%05d", i)
			p.Labels["session"] = fmt.Sprintf("session-%05d", i)
			obj = p
		}
		if asKubectl {
			kubectlShape(obj, i)
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return 0, err
		}
		for j, line := range strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n") {
			if j == 0 {
				_, _ = w.WriteString("- ")
			} else {
				_, _ = w.WriteString("  ")
			}
			_, _ = w.WriteString(line)
		}
		_, _ = w.WriteString("\n")
	}
	fmt.Fprintln(w, "kind: List\nmetadata:\n  resourceVersion: \"\"")
	if err := w.Flush(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// kubectlShape makes obj what kubectl get -o yaml prints of a stored
// object: kubectl leaves managedFields out unless --show-managed-fields, the
// apiserver adds uid, resourceVersion and creationTimestamp, and a
// scheduled pod has a status.
func kubectlShape(obj any, i int) {
	created := metav1.NewTime(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	meta := func(m *metav1.ObjectMeta) {
		m.ManagedFields = nil
		m.UID = types.UID(fmt.Sprintf("6f1c2a9e-4b7d-4e0a-9c3f-%012d", i))
		m.ResourceVersion = fmt.Sprint(1000000 + i)
		m.CreationTimestamp = created
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		meta(&o.ObjectMeta)
		o.Spec.NodeName = fmt.Sprintf("node-%03d", i%200)
		o.Status = corev1.PodStatus{
			Phase:     corev1.PodRunning,
			HostIP:    "10.0.3.17",
			PodIP:     fmt.Sprintf("10.244.%d.%d", i/250%256, i%250+2),
			QOSClass:  corev1.PodQOSBurstable,
			StartTime: &created,
		}
		for _, c := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
			o.Status.Conditions = append(o.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: created})
		}
		for _, c := range o.Spec.Containers {
			o.Status.ContainerStatuses = append(o.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + strings.Repeat("3f", 32),
				ContainerID: "containerd://" + strings.Repeat("9a", 32), Ready: true, Started: ptr(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}},
			})
		}
	case *appsv1.Deployment:
		meta(&o.ObjectMeta)
	case *batchv1.Job:
		meta(&o.ObjectMeta)
	}
}

func ptr[T any](v T) *T { return &v }

func template(pod *corev1.Pod) corev1.PodTemplateSpec {
	p := pod.DeepCopy()
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations},
		Spec:       p.Spec,
	}
}

func deployment(pod *corev1.Pod, i int) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("warm-pool-%05d", i), Namespace: pod.Namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}},
			Template: template(pod),
		},
	}
}

func job(pod *corev1.Pod, i int) *batchv1.Job {
	t := template(pod)
	t.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eval-%05d", i), Namespace: pod.Namespace},
		Spec:       batchv1.JobSpec{Template: t},
	}
}

// handlerCPUPerReview serves n reviews of the typical pod through the
// admission handler in this process and returns the process CPU time per
// review.
func handlerCPUPerReview(n int) (time.Duration, error) {
	set, err := benchdata.PolicySet(1)
	if err != nil {
		return 0, err
	}
	var config atomic.Pointer[admission.Config]
	config.Store(&admission.Config{Policies: set})
	lookup := func(_ context.Context, name string) (mutate.Namespace, bool) {
		return mutate.Namespace{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}, true
	}
	webhook := admission.NewHandler(&config, lookup, admission.NewMetrics(prometheus.NewRegistry()), logr.Discard()).Webhook()
	body := benchdata.Review(json.RawMessage(benchdata.Cases()[0].Pod))
	serve := func() error {
		r := httptest.NewRequest(http.MethodPost, admission.Path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		webhook.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			return fmt.Errorf("handler answered %d: %s", w.Code, w.Body.String())
		}
		return nil
	}
	for range n / 10 { // warm up
		if err := serve(); err != nil {
			return 0, err
		}
	}
	before := processCPU()
	for range n {
		if err := serve(); err != nil {
			return 0, err
		}
	}
	return (processCPU() - before) / time.Duration(n), nil
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	}
}
