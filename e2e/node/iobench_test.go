//go:build nodee2e && iobench

package node

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// make io-bench (docs/io.md): the node's containerd snapshots (the
// containers' root file systems) and the kubelet's root (its emptyDirs) on
// a block device of their own, and N sandbox pods at once doing a cold uv
// install (uvinstall/), in four setups: no webhook (uv's hardlinks, and
// copies), memory mode and disk mode, with iostat on the device.
const (
	// ioPodsEnv lists the pod counts to run, "4 8 16" by default.
	ioPodsEnv = "IO_BENCH_PODS"
	// ioOutEnv is the directory of the CSV files (samples and summary).
	ioOutEnv = "IO_BENCH_OUT"
	// ioDiskEnv is the size of the device's backing file (sparse).
	ioDiskEnv = "IO_BENCH_DISK"

	nsIOPlain  = "io-plain"
	nsIOMemory = "io-memory"
	nsIODisk   = "io-disk"
)

// ioDevice is the node's block device, /dev/loopN, once attached.
var ioDevice string

func init() {
	nodeDevice = attachDevice
	benchNamespace = func(assets string) []testNamespace {
		// The seed's sizes: a 1Gi cache (a whole install fits) and 8Gi of
		// pod-level headroom.
		p := map[string][]byte{"io-bench.yaml": fmt.Appendf(nil, policyYAML, "1Gi", "8Gi", assets)}
		return []testNamespace{{nsIOPlain, "", nil}, {nsIOMemory, "off", p}, {nsIODisk, "on", p}}
	}
}

// attachDevice puts dir on an ext4 file system of its own, on a loop device
// over a sparse file of the machine's disk. The loop device does direct
// I/O: its requests go to the disk as they are made, not into the page
// cache of the backing file, so what iostat reports for it (queue, waits,
// utilisation) is the disk's, as it would be for a node's own disk. The
// ext4 on top keeps its own page cache and journal, as a node's does.
func attachDevice(ctx context.Context, dir string) (func() error, error) {
	img := filepath.Join(filepath.Dir(dir), "io-bench.img")
	size := cmp.Or(os.Getenv(ioDiskEnv), "24G")
	run := func(name string, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := run("truncate", "-s", size, img); err != nil {
		return nil, err
	}
	dev, err := run("losetup", "--direct-io=on", "--sector-size", "4096", "--find", "--show", img)
	if err != nil {
		return func() error { return os.Remove(img) }, err
	}
	stop := func() error {
		var errs []error
		if _, err := os.Stat(filepath.Join(dir, "lost+found")); err == nil {
			_, err := run("umount", dir)
			errs = append(errs, err)
		}
		_, err := run("losetup", "-d", dev)
		return errors.Join(append(errs, err, os.Remove(img))...)
	}
	// The inode tables and journal are written now rather than by a kernel
	// thread in the first runs' windows.
	if _, err := run("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev); err != nil {
		return stop, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return stop, err
	}
	// discard: a deleted pod's files give their blocks back to the sparse
	// file, so runs one after another do not fill the machine's disk.
	if _, err := run("mount", "-o", "discard", dev, dir); err != nil {
		return stop, err
	}
	ioDevice = dev
	return stop, nil
}

// ioSetup is one of the setups: where the uv cache lives, and how uv puts
// its files into the environment.
type ioSetup struct {
	ns, name string
	// podCopy is whether the pod sets UV_LINK_MODE=copy itself (the
	// webhook sets it in the other two modes).
	podCopy bool
	// copies is whether the install copies its files (UV_LINK_MODE=copy,
	// or a cache on another file system) rather than hardlinking them.
	copies bool
	// onDevice is how many times the wheels' bytes reach the device: the
	// cache on it (overlayfs or the emptyDir) and the copies.
	onDevice int
}

// key names the setup in the CSV files.
func (s ioSetup) key() string {
	if s.podCopy {
		return s.ns + "-copy"
	}
	return s.ns
}

var ioSetups = []ioSetup{
	// No webhook: the cache in the container's root file system (overlayfs
	// upper layer), linked into the environment with hardlinks (uv's default).
	{nsIOPlain, "no webhook (cache on overlayfs, hardlinks)", false, false, 1},
	// No webhook, and an image or task that sets UV_LINK_MODE=copy: every
	// file on the disk twice, in the cache and in the environment.
	{nsIOPlain, "no webhook (cache on overlayfs, copies)", true, true, 2},
	// The cache on tmpfs, copied into the root file system.
	{nsIOMemory, "memory mode (cache on tmpfs)", false, true, 1},
	// The cache on the kubelet's disk (an emptyDir on the same device, a
	// different file system), copied into the root file system.
	{nsIODisk, "disk mode (cache on the node's disk)", false, true, 2},
}

// ioResult is one run: n pods of one setup.
type ioResult struct {
	setup ioSetup
	n     int
	// install is each pod's install time as uvinstall measured it; pod is
	// from the create to the container's end (seconds: the API's
	// resolution).
	install, pod []float64
	samples      []iostatSample
	// busy is how many of the samples fall in the installs' window, from
	// the first create to the last pod's end; the rest are the writeback
	// after it, until a sync returned.
	busy int
	// wall is the installs' window.
	wall time.Duration
}

// iostatSample is one second of iostat -x for the device.
type iostatSample struct {
	WritesPerSec float64 `json:"w/s"`
	WriteKBPerS  float64 `json:"wkB/s"`
	ReadsPerSec  float64 `json:"r/s"`
	QueueSize    float64 `json:"aqu-sz"`
	WriteAwait   float64 `json:"w_await"`
	ReadAwait    float64 `json:"r_await"`
	Util         float64 `json:"util"`
}

// iostat runs `iostat -dxy 1` on dev until stop is called, which returns the
// samples (one a second, the first second after start excluded by -y).
func iostat(dev string) (stop func() ([]iostatSample, error), err error) {
	out, err := os.CreateTemp("", "iostat-*.json")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("iostat", "-dxy", "-o", "JSON", "1", filepath.Base(dev))
	cmd.Stdout = out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		out.Close()
		os.Remove(out.Name())
		return nil, fmt.Errorf("iostat (apt-get install sysstat): %w", err)
	}
	return func() ([]iostatSample, error) {
		defer os.Remove(out.Name())
		defer out.Close()
		// SIGINT makes iostat close its JSON document.
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("iostat: %w", err)
		}
		b, err := os.ReadFile(out.Name())
		if err != nil {
			return nil, err
		}
		var doc struct {
			Sysstat struct {
				Hosts []struct {
					Statistics []struct {
						Disk []iostatSample `json:"disk"`
					} `json:"statistics"`
				} `json:"hosts"`
			} `json:"sysstat"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("iostat's JSON: %w", err)
		}
		var s []iostatSample
		for _, h := range doc.Sysstat.Hosts {
			for _, st := range h.Statistics {
				if len(st.Disk) != 1 {
					return nil, fmt.Errorf("iostat: %d devices in a sample, want %s", len(st.Disk), dev)
				}
				s = append(s, st.Disk[0])
			}
		}
		return s, nil
	}, nil
}

// installPod is a sandbox pod running uvinstall from the host (a read-only
// hostPath of the test's own: the image is busybox).
func installPod(s ioSetup, name, binDir string) *corev1.Pod {
	p := testkit.SandboxPod(s.ns, name, onNode(""))
	c := &p.Spec.Containers[0]
	c.Command = []string{"/bench/uvinstall"}
	if s.podCopy {
		c.Env = []corev1.EnvVar{{Name: "UV_LINK_MODE", Value: "copy"}}
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "bench", MountPath: "/bench", ReadOnly: true}}
	p.Spec.Volumes = []corev1.Volume{{Name: "bench", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: binDir, Type: ptr.To(corev1.HostPathDirectory)}}}}
	return p
}

// uvResult is uvinstall's report, the container's termination message.
type uvResult struct {
	Seconds float64 `json:"seconds"`
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	Copied  int     `json:"copied"`
}

// syncFS flushes dir's file system (syncfs) and waits for it.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// quiesce writes back everything dirty and drops the clean page cache, so
// that every run starts from the same state.
func quiesce(dir string) error {
	if err := syncFS(dir); err != nil {
		return err
	}
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}

func runIO(ctx context.Context, t *testing.T, s ioSetup, n int, binDir string) (ioResult, error) {
	r := ioResult{setup: s, n: n}
	nodeDir := filepath.Join(suite.root, "_output", "node", "node")
	if err := quiesce(nodeDir); err != nil {
		return r, err
	}
	stop, err := iostat(ioDevice)
	if err != nil {
		return r, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_, _ = stop()
		}
	}()
	// Let iostat take its first (excluded) second.
	time.Sleep(1100 * time.Millisecond)
	start := time.Now()
	pods := make([]*corev1.Pod, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		pods[i] = installPod(s, fmt.Sprintf("install-%d-%d", n, i), binDir)
		wg.Go(func() {
			_, errs[i] = suite.cs.CoreV1().Pods(s.ns).Create(ctx, pods[i], metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	defer func() {
		wg := sync.WaitGroup{}
		for _, p := range pods {
			wg.Go(func() {
				if cur, err := suite.cs.CoreV1().Pods(s.ns).Get(context.Background(), p.Name, metav1.GetOptions{}); err == nil {
					if err := deletePod(context.Background(), cur); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}()
	done, err := waitAll(ctx, s.ns, n)
	if err != nil {
		return r, err
	}
	r.wall = time.Since(start)
	busyUntil := time.Now()
	// The writeback the installs left: the run's writes are all on the
	// device when this returns.
	if err := syncFS(nodeDir); err != nil {
		return r, err
	}
	time.Sleep(1100 * time.Millisecond)
	stopped = true
	if r.samples, err = stop(); err != nil {
		return r, err
	}
	r.busy = min(len(r.samples), int(math.Ceil(busyUntil.Sub(start).Seconds())))
	for i, p := range done {
		st := p.Status.ContainerStatuses[0].State.Terminated
		var u uvResult
		if err := json.Unmarshal([]byte(st.Message), &u); err != nil {
			return r, fmt.Errorf("pod %s: termination message %q: %w", p.Name, st.Message, err)
		}
		if want := map[bool]int{true: u.Files, false: 0}[s.copies]; u.Copied != want {
			return r, fmt.Errorf("%s: pod %s copied %d of %d files, want %d: the cache is not where the setup puts it", s.name, p.Name, u.Copied, u.Files, want)
		}
		r.install = append(r.install, u.Seconds)
		r.pod = append(r.pod, st.FinishedAt.Sub(p.CreationTimestamp.Time).Seconds())
		// The device holds what the setup puts on it: a check that the
		// bench measures the device it means to.
		if i == 0 {
			written := 0.0
			for _, x := range r.samples {
				written += x.WriteKBPerS * 1024
			}
			if want := float64(int64(n*s.onDevice) * u.Bytes); written < want {
				return r, fmt.Errorf("%s: %.0f MiB written to %s, want at least %.0f MiB (%d pods' wheels, %d times)", s.name, written/(1<<20), ioDevice, want/(1<<20), n, s.onDevice)
			}
		}
	}
	return r, nil
}

// waitAll waits until n pods of ns have succeeded (a failed one is an error).
func waitAll(ctx context.Context, ns string, n int) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	for {
		list, err := suite.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		ok := 0
		for _, p := range list.Items {
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				ok++
			case corev1.PodFailed:
				msg := ""
				if st := p.Status.ContainerStatuses; len(st) > 0 && st[0].State.Terminated != nil {
					msg = st[0].State.Terminated.Message
				}
				return nil, fmt.Errorf("pod %s/%s: %s: %s; see %s", ns, p.Name, containerState(&p), msg, suite.node.Log("kubelet"))
			}
		}
		if ok == n && len(list.Items) == n {
			return list.Items, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d pods of %s succeeded", ok, n, ns)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestIOBench runs each setup with each pod count (the setups' order turns
// with each count, so none always runs first) and writes the results.
func TestIOBench(t *testing.T) {
	if ioDevice == "" {
		t.Fatal("the node is not on a device of its own")
	}
	counts := []int{4, 8, 16}
	if v := os.Getenv(ioPodsEnv); v != "" {
		counts = nil
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want positive numbers", ioPodsEnv, v)
			}
			counts = append(counts, n)
		}
	}
	binDir := filepath.Join(suite.root, "_output", "node", "bench")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", filepath.Join(binDir, "uvinstall"), "./node/uvinstall")
	build.Dir = filepath.Join(suite.root, "e2e")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building uvinstall: %v\n%s", err, out)
	}
	// What the node itself writes with no pods (containerd's and the
	// kubelet's state and logs), over as long as a run.
	if err := quiesce(filepath.Join(suite.root, "_output", "node", "node")); err != nil {
		t.Fatal(err)
	}
	stop, err := iostat(ioDevice)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second)
	idle, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle node, %d s: %.1f w/s, %.1f wkB/s", len(idle), mean(idle, func(x iostatSample) float64 { return x.WritesPerSec }), mean(idle, func(x iostatSample) float64 { return x.WriteKBPerS }))
	var results []ioResult
	for i, n := range counts {
		for j := range ioSetups {
			s := ioSetups[(i+j)%len(ioSetups)]
			r, err := runIO(t.Context(), t, s, n, binDir)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d pods, %s: %s", n, s.name, r.summary())
			results = append(results, r)
		}
	}
	t.Logf("\n%s", ioTable(results))
	if out := os.Getenv(ioOutEnv); out != "" {
		if err := writeIOCSV(out, results); err != nil {
			t.Fatal(err)
		}
	}
}

// ioStats are a run's numbers as docs/io.md gives them.
type ioStats struct {
	// Over the installs' window: iostat's columns, averaged per second
	// (w_await weighted by writes); the busiest second's writes and queue.
	writes, writeKB, queue, wAwait, util float64
	peakWrites, peakQueue                float64
	// In all, the writeback after the installs included.
	totalWrites, totalMiB float64
	install50, install99  float64
	pod50, pod99          float64
}

func (r ioResult) stats() ioStats {
	var s ioStats
	var awaitSum float64
	for i, x := range r.samples {
		s.totalWrites += x.WritesPerSec
		s.totalMiB += x.WriteKBPerS / 1024
		if i >= r.busy {
			continue
		}
		s.writes += x.WritesPerSec
		s.writeKB += x.WriteKBPerS
		s.queue += x.QueueSize
		s.util += x.Util
		awaitSum += x.WriteAwait * x.WritesPerSec
		s.peakWrites = max(s.peakWrites, x.WritesPerSec)
		s.peakQueue = max(s.peakQueue, x.QueueSize)
	}
	if s.writes > 0 {
		s.wAwait = awaitSum / s.writes
	}
	if b := float64(r.busy); b > 0 {
		s.writes, s.writeKB, s.queue, s.util = s.writes/b, s.writeKB/b, s.queue/b, s.util/b
	}
	s.install50, s.install99 = quantile(r.install, 0.5), quantile(r.install, 0.99)
	s.pod50, s.pod99 = quantile(r.pod, 0.5), quantile(r.pod, 0.99)
	return s
}

func mean(s []iostatSample, f func(iostatSample) float64) float64 {
	var sum float64
	for _, x := range s {
		sum += f(x)
	}
	return sum / float64(max(1, len(s)))
}

// quantile is the nearest-rank quantile of v.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

func (r ioResult) summary() string {
	s := r.stats()
	return fmt.Sprintf("%.0f w/s, %.0f wkB/s, aqu-sz %.2f, w_await %.2f ms, util %.0f%% over %s (peak %.0f w/s, aqu-sz %.2f); %.0f writes, %.0f MiB in all; install p50 %.2f s p99 %.2f s; pod p50 %.0f s p99 %.0f s",
		s.writes, s.writeKB, s.queue, s.wAwait, s.util, r.wall.Round(100*time.Millisecond), s.peakWrites, s.peakQueue,
		s.totalWrites, s.totalMiB, s.install50, s.install99, s.pod50, s.pod99)
}

// ioTable is the Markdown table of docs/io.md.
func ioTable(rs []ioResult) string {
	var b strings.Builder
	b.WriteString("| pods | setup | w/s | wkB/s | aqu-sz | w_await ms | %util | peak w/s | peak aqu-sz | writes in all | MiB in all | install p50 / p99 s | pod p50 / p99 s | window s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b ioResult) int {
		return cmp.Or(cmp.Compare(a.n, b.n), cmp.Compare(slices.Index(ioSetups, a.setup), slices.Index(ioSetups, b.setup)))
	})
	for _, r := range sorted {
		s := r.stats()
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %.2f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f / %.2f | %.0f / %.0f | %.1f |\n",
			r.n, r.setup.name, s.writes, s.writeKB, s.queue, s.wAwait, s.util, s.peakWrites, s.peakQueue,
			s.totalWrites, s.totalMiB, s.install50, s.install99, s.pod50, s.pod99, r.wall.Seconds())
	}
	return b.String()
}

// writeIOCSV writes samples.csv (each second of each run) and summary.csv.
func writeIOCSV(dir string, rs []ioResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	samples := [][]string{{"setup", "pods", "second", "busy", "w/s", "wkB/s", "aqu-sz", "w_await", "util"}}
	summary := [][]string{{"setup", "pods", "w/s", "wkB/s", "aqu-sz", "w_await", "util", "peak_w/s", "peak_aqu-sz", "writes_total", "mib_total", "install_p50", "install_p99", "pod_p50", "pod_p99", "window_s"}}
	for _, r := range rs {
		for i, x := range r.samples {
			samples = append(samples, []string{r.setup.key(), strconv.Itoa(r.n), strconv.Itoa(i + 1), strconv.FormatBool(i < r.busy),
				f(x.WritesPerSec), f(x.WriteKBPerS), f(x.QueueSize), f(x.WriteAwait), f(x.Util)})
		}
		s := r.stats()
		summary = append(summary, []string{r.setup.key(), strconv.Itoa(r.n), f(s.writes), f(s.writeKB), f(s.queue), f(s.wAwait), f(s.util),
			f(s.peakWrites), f(s.peakQueue), f(s.totalWrites), f(s.totalMiB), f(s.install50), f(s.install99), f(s.pod50), f(s.pod99), f(r.wall.Seconds())})
	}
	for name, rows := range map[string][][]string{"samples.csv": samples, "summary.csv": summary} {
		out, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		w := csv.NewWriter(out)
		if err := w.WriteAll(rows); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	return nil
}
