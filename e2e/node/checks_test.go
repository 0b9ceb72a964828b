//go:build nodee2e

package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// mode is what a namespace's webhook should have given its pods.
type mode string

const (
	memoryMode mode = "memory"
	diskMode   mode = "disk"
)

// check is one fact about a running sandbox pod, checked on the node; it
// returns an error that says what the pod got instead.
type check struct {
	name string
	run  func(ctx context.Context, p *corev1.Pod, m mode) error
}

// runningChecks are the checks on a running sandbox pod (sleepScript).
var runningChecks = []check{
	{"uv cache mount, inside", checkCacheInside},
	{"uv cache mount, on the node", checkCacheOnNode},
	{"asset read-only with its files", checkAsset},
	{"UV_LINK_MODE=copy in the process environment", checkEnv},
	{"pod cgroup limited to the pod-level limit", checkPodLimit},
	{"cache bytes charged to the pod's memory cgroup", checkCharge},
}

const sleepScript = "exec sleep 3600"

// mountLine returns the container's mountinfo line for mountPoint, or "".
func mountLine(ctx context.Context, p *corev1.Pod, mountPoint string) (string, error) {
	out, err := suite.node.Exec(ctx, containerID(p), "cat /proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading the container's mountinfo: %w: %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mountPoint {
			return line, nil
		}
	}
	return "", nil
}

// fsType is the filesystem type of a mountinfo line.
func fsType(line string) string {
	_, after, ok := strings.Cut(line, " - ")
	if !ok {
		return ""
	}
	return strings.Fields(after)[0]
}

func checkCacheInside(ctx context.Context, p *corev1.Pod, m mode) error {
	line, err := mountLine(ctx, p, cachePath)
	if err != nil {
		return err
	}
	if line == "" {
		return fmt.Errorf("%s is not a mount in the container", cachePath)
	}
	typ := fsType(line)
	switch m {
	case memoryMode:
		want := fmt.Sprintf("size=%dk", cacheSize>>10)
		if typ != "tmpfs" || !strings.Contains(line, want) {
			return fmt.Errorf("%s: want a tmpfs with %s, got %q", cachePath, want, line)
		}
	case diskMode:
		if typ == "tmpfs" {
			return fmt.Errorf("%s: want node disk, got a tmpfs: %q", cachePath, line)
		}
	}
	return nil
}

func checkCacheOnNode(ctx context.Context, p *corev1.Pod, m mode) error {
	mounts, err := suite.node.MountInfo()
	if err != nil {
		return err
	}
	dir := filepath.Join(suite.node.KubeletRoot, "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "uv-cache")
	var line string
	for _, l := range mounts {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			line = l
		}
	}
	switch m {
	case memoryMode:
		if fsType(line) != "tmpfs" {
			return fmt.Errorf("the node has no tmpfs at %s (got %q)", dir, line)
		}
	case diskMode:
		if line != "" {
			return fmt.Errorf("the node mounted something at %s: %q", dir, line)
		}
		// A disk-backed emptyDir is a plain directory of the kubelet.
		if out, err := suite.node.Exec(ctx, containerID(p), "test -d "+cachePath); err != nil {
			return fmt.Errorf("%s missing in the container: %s", cachePath, out)
		}
	}
	return nil
}

func checkAsset(ctx context.Context, p *corev1.Pod, _ mode) error {
	var errs []error
	out, err := suite.node.Exec(ctx, containerID(p), "cat "+assetPath+"/"+assetFile)
	if err != nil || out != assetText {
		errs = append(errs, fmt.Errorf("%s/%s: want %q, got %q (%s)", assetPath, assetFile, assetText, out, exitText(err)))
	}
	out, err = suite.node.Exec(ctx, containerID(p), "touch "+assetPath+"/written-by-the-pod")
	if err == nil || !strings.Contains(out, "Read-only file system") {
		errs = append(errs, fmt.Errorf("writing to %s: want EROFS, got %q (%s)", assetPath, strings.TrimSpace(out), exitText(err)))
	}
	return errors.Join(errs...)
}

// exitText describes how a probe command ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func checkEnv(ctx context.Context, p *corev1.Pod, _ mode) error {
	out, err := suite.node.Exec(ctx, containerID(p), "tr '\\0' '\\n' < /proc/1/environ")
	if err != nil {
		return fmt.Errorf("reading the environment of the container's process: %w: %s", err, out)
	}
	for _, kv := range strings.Split(out, "\n") {
		if kv == "UV_LINK_MODE=copy" {
			return nil
		}
	}
	return fmt.Errorf("UV_LINK_MODE=copy not in the environment of the container's process")
}

func checkPodLimit(_ context.Context, p *corev1.Pod, _ mode) error {
	if p.Spec.Resources == nil || p.Spec.Resources.Limits.Memory().IsZero() {
		return errors.New("the pod has no pod-level memory limit")
	}
	want := p.Spec.Resources.Limits.Memory().Value()
	got, err := readInt(filepath.Join(podCgroup(p, "memory"), "memory.limit_in_bytes"))
	if err != nil {
		return err
	}
	if got != want || want != podLimit {
		return fmt.Errorf("pod cgroup memory.limit_in_bytes = %d, pod-level limit %d, policy's %d", got, want, podLimit)
	}
	return nil
}

// chargeBytes are written into the uv cache by checkCharge.
const chargeBytes = 32 << 20

func checkCharge(ctx context.Context, p *corev1.Pod, m mode) error {
	cg := podCgroup(p, "memory")
	before, err := memoryStat(cg)
	if err != nil {
		return err
	}
	out, err := suite.node.Exec(ctx, containerID(p), fmt.Sprintf("dd if=/dev/zero of=%s/blob bs=1M count=%d 2>&1 && sync", cachePath, chargeBytes>>20))
	if err != nil {
		return fmt.Errorf("writing %d MiB into %s: %w: %s", chargeBytes>>20, cachePath, err, out)
	}
	after, err := memoryStat(cg)
	if err != nil {
		return err
	}
	shmem := after["total_shmem"] - before["total_shmem"]
	switch m {
	case memoryMode:
		if shmem < chargeBytes {
			return fmt.Errorf("wrote %d bytes to the tmpfs cache; the pod's memory cgroup shmem grew by %d", chargeBytes, shmem)
		}
	case diskMode:
		if shmem >= 1<<20 {
			return fmt.Errorf("wrote %d bytes to the disk cache; the pod's memory cgroup shmem grew by %d", chargeBytes, shmem)
		}
	}
	return nil
}

// TestPodGets runs a sandbox pod in each mode and checks what it got.
func TestPodGets(t *testing.T) {
	for _, c := range []struct {
		ns string
		m  mode
	}{{nsMemory, memoryMode}, {nsDisk, diskMode}} {
		t.Run(string(c.m), func(t *testing.T) {
			ctx := t.Context()
			p, err := runPod(ctx, testkit.SandboxPod(c.ns, "gets", onNode(sleepScript)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := deletePod(context.Background(), p); err != nil {
					t.Error(err)
				}
			})
			for _, ch := range runningChecks {
				if err := ch.run(ctx, p, c.m); err != nil {
					t.Errorf("%s: %v", ch.name, err)
				}
			}
		})
	}
}

// TestChecksFailWithoutWebhook runs the same pod where no webhook mutates
// it: every check must fail, or it could not tell a mutated pod from a
// plain one.
func TestChecksFailWithoutWebhook(t *testing.T) {
	ctx := t.Context()
	p, err := runPod(ctx, testkit.SandboxPod(nsPlain, "plain", onNode(sleepScript)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := deletePod(context.Background(), p); err != nil {
			t.Error(err)
		}
	})
	for _, m := range []mode{memoryMode, diskMode} {
		for _, ch := range runningChecks {
			err := ch.run(ctx, p, m)
			if err == nil {
				t.Errorf("%s (%s mode) passed on an unmutated pod", ch.name, m)
				continue
			}
			t.Logf("%s (%s mode), unmutated pod: %v", ch.name, m, err)
		}
	}
	if err := checkOOM(ctx, nsPlain); err == nil {
		t.Error("the OOM check passed on an unmutated pod")
	} else {
		t.Logf("pod-level OOM, unmutated pod: %v", err)
	}
}

// oomScript allocates past the pod-level limit in one buffer.
const oomScript = "exec dd if=/dev/zero of=/dev/null bs=256M count=1"

// checkOOM runs a sandbox pod that allocates past the pod-level limit; its
// container has no memory limit of its own, so only the pod's cgroup can
// stop it.
func checkOOM(ctx context.Context, ns string) error {
	p, err := runOOMPod(ctx, ns)
	if p != nil {
		defer func() { _ = deletePod(context.Background(), p) }()
	}
	if err != nil {
		return err
	}
	if lim := p.Spec.Containers[0].Resources.Limits.Memory(); !lim.IsZero() {
		return fmt.Errorf("the container has a memory limit of its own (%s): the check needs it to have none", lim)
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term.Reason != "OOMKilled" {
		return fmt.Errorf("allocating 256 MiB: want OOMKilled at the pod's limit, got %s (exit code %d)", term.Reason, term.ExitCode)
	}
	failcnt, err := readInt(filepath.Join(podCgroup(p, "memory"), "memory.failcnt"))
	if err != nil {
		return err
	}
	if failcnt == 0 {
		return errors.New("OOMKilled, but the pod cgroup's memory.failcnt is 0: the pod's limit was not the one hit")
	}
	return nil
}

func runOOMPod(ctx context.Context, ns string) (*corev1.Pod, error) {
	pod := testkit.SandboxPod(ns, "oom", onNode(oomScript))
	if _, err := suite.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return waitPod(ctx, pod, "terminated", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
}

// TestPodLimitOOM: a pod that allocates past its headroom is OOM-killed at
// the pod-level limit, in both modes.
func TestPodLimitOOM(t *testing.T) {
	for _, ns := range []string{nsMemory, nsDisk} {
		t.Run(ns, func(t *testing.T) {
			if err := checkOOM(t.Context(), ns); err != nil {
				t.Error(err)
			}
		})
	}
}

// chargedLimit is the memory limit of the container of TestCacheChargedToContainerLimit:
// it holds chargedWheels of cache and chargedAlloc of anonymous memory only
// while the cache is reclaimable page cache, on disk.
const (
	chargedLimit  = 96 << 20
	chargedWheels = 48 // MiB unpacked into the cache, a file each, as uv does
	chargedAlloc  = 64 // MiB the workload then allocates in one buffer
)

// chargedScript unpacks chargedWheels one-MiB "wheels" into the uv cache,
// then allocates chargedAlloc MiB: what a task does that installs its
// requirements and then runs.
var chargedScript = fmt.Sprintf(`set -e
i=0
while [ $i -lt %d ]; do dd if=/dev/urandom of=%s/wheel-$i bs=1M count=1 2>/dev/null; i=$((i+1)); done
exec dd if=/dev/zero of=/dev/null bs=%dM count=1`, chargedWheels, cachePath, chargedAlloc)

// TestCacheChargedToContainerLimit: a container with a memory limit of its
// own whose workload fits that limit with the cache on disk is OOM-killed
// with the same cache on tmpfs, whose pages are charged to the container
// that writes them and cannot be reclaimed; the pod-level headroom does not
// raise the container's limit. The webhook says so when the pod is created.
// With containerLimits: raise the webhook raises the container's limit by
// the cache's size, and the same workload completes with its cache on tmpfs.
func TestCacheChargedToContainerLimit(t *testing.T) {
	for _, c := range []struct {
		ns     string
		reason string // the container's end
		warned []string
		limit  int64 // the container's limit as stored
	}{
		{nsMemory, "OOMKilled", []string{`sandbox-webhook: policy "node-e2e": cache/uv-cache: container "task" limits its memory to 96Mi, and this in-memory cache counts against it: up to 64Mi, leaving 32Mi to its processes before an OOM kill`}, chargedLimit},
		{nsDisk, "Completed", nil, chargedLimit},
		{nsRaise, "Completed", nil, chargedLimit + cacheSize},
	} {
		t.Run(c.ns, func(t *testing.T) {
			ctx := t.Context()
			pod := testkit.SandboxPod(c.ns, "charged", onNode(chargedScript))
			pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(chargedLimit, resource.BinarySI)}
			var warned warningList
			cfg := rest.CopyConfig(suite.config)
			cfg.WarningHandler = &warned
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := deletePod(context.Background(), pod); err != nil {
					t.Error(err)
				}
			})
			if !slices.Equal(warned, c.warned) {
				t.Errorf("create warnings\n got %q\nwant %q", warned, c.warned)
			}
			p, err := waitPod(ctx, pod, "terminated", func(p *corev1.Pod) bool {
				return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// The cache is where the namespace's mode puts it: tmpfs but
			// in disk mode.
			inMemory := slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == "uv-cache" && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory
			})
			if inMemory != (c.ns != nsDisk) {
				t.Errorf("the uv cache in memory: %v, want %v", inMemory, c.ns != nsDisk)
			}
			if lim := p.Spec.Containers[0].Resources.Limits.Memory().Value(); lim != c.limit {
				t.Fatalf("the container's memory limit is %d, want %d", lim, c.limit)
			}
			if p.Spec.Resources == nil {
				t.Error("the pod has no pod-level resources: the webhook did not mutate it")
			} else if got := p.Spec.Resources.Limits.Memory().Value(); got != podLimit {
				t.Errorf("the pod-level limit is %d, want the policy's %d", got, podLimit)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			t.Logf("%s: %d MiB of cache, then %d MiB allocated under a %d MiB container limit: %s (exit code %d)",
				c.ns, chargedWheels, chargedAlloc, c.limit>>20, term.Reason, term.ExitCode)
			if term.Reason != c.reason {
				t.Errorf("the container ended %s (exit code %d), want %s", term.Reason, term.ExitCode, c.reason)
			}
		})
	}
}

// warningList collects the warnings the apiserver sends a client.
type warningList []string

func (w *warningList) HandleWarningHeader(_ int, _ string, text string) { *w = append(*w, text) }
