//go:build nodee2e

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

const (
	// leakPodsEnv is how many pods TestLeak churns per mode (make
	// node-leak sets it); leakOutEnv is the CSV file it writes.
	leakPodsEnv = "NODE_LEAK_PODS"
	leakOutEnv  = "NODE_LEAK_OUT"
	// leakOrderEnv=disk churns in disk mode first.
	leakOrderEnv = "NODE_LEAK_ORDER"
	// leakPackages is how many packages each churned pod writes into its
	// uv cache, 31 files each (see uvCacheScript).
	leakPackages = 48
	// leakParallel pods are churned at a time.
	leakParallel = 4
)

// idleMode labels the samples of the idle phase: no pods, same duration.
const idleMode mode = "idle"

// leakSample is the kernel's accounting after churned pods.
type leakSample struct {
	mode    mode
	churned int
	at      time.Time
	// numCgroups is /proc/cgroups' memory num_cgroups: every memory
	// cgroup of the machine, the dying (removed, still pinned) ones too.
	numCgroups int64
	// live is the number of memory cgroups under the node's kubepods.
	live int
	// The kubepods cgroup's memory.stat: total_cache, total_shmem,
	// total_rss, and its memory.usage_in_bytes.
	cache, shmem, rss, usage int64
}

func takeSample(m mode, churned int) (leakSample, error) {
	s := leakSample{mode: m, churned: churned, at: time.Now()}
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "memory" {
			s.numCgroups, _ = strconv.ParseInt(f[2], 10, 64)
		}
	}
	kubepods := suite.node.Cgroup("memory", "kubepods")
	_ = filepath.WalkDir(kubepods, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			s.live++
		}
		return nil
	})
	st, err := memoryStat(kubepods)
	if err != nil {
		return s, err
	}
	s.cache, s.shmem, s.rss = st["total_cache"], st["total_shmem"], st["total_rss"]
	s.usage, err = readInt(filepath.Join(kubepods, "memory.usage_in_bytes"))
	return s, err
}

// churnOne creates a sandbox pod that writes into its uv cache and exits,
// waits for it to finish, and deletes it (until its cgroup is gone).
func churnOne(ctx context.Context, ns string, i int) error {
	script := uvCacheScript(cachePath, leakPackages)
	pod := testkit.SandboxPod(ns, fmt.Sprintf("churn-%d", i), onNode(script))
	if _, err := suite.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	p, err := waitPod(ctx, pod, "completed", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if err != nil {
		return err
	}
	if p.Status.Phase != corev1.PodSucceeded {
		return fmt.Errorf("churned pod %s/%s: %s", ns, p.Name, containerState(p))
	}
	return deletePod(ctx, p)
}

// uvCacheScript is a shell script (busybox ash, builtins but for mkdir)
// that writes a cache shaped like uv's into dir: per package an unpacked
// wheel under archive-v0/ (25 modules in three subpackages, 256 B to
// 16 KiB each, and five .dist-info files) and a wheels-v5 entry: 31 files,
// about 0.15 MiB, per package. Dentries and inodes of many small files
// are charged to the pod's memory cgroup as well as their pages, which a
// single large file does not show; hack/kernelleak writes a cache of the
// same kind.
func uvCacheScript(dir string, packages int) string {
	return fmt.Sprintf(`c=%s; p=0
while [ $p -lt %d ]; do
  d=$c/archive-v0/$p/pkg$p; i=$d/pkg$p-1.0.dist-info
  mkdir -p $d/s0 $d/s1 $d/s2 $i $c/wheels-v5/pypi/pkg$p
  m=0
  while [ $m -lt 25 ]; do printf "%%$((256 << ((m * 7 + p) %% 7)))s" > $d/s$((m %% 3))/m$m.py; m=$((m + 1)); done
  for f in METADATA RECORD WHEEL top_level.txt INSTALLER; do printf "%%2048s" > $i/$f; done
  printf "%%512s" > $c/wheels-v5/pypi/pkg$p/pkg$p-1.0-py3-none-any.msgpack
  p=$((p + 1))
done`, dir, packages)
}

// TestLeak churns sandbox pods in memory mode, then in disk mode, and
// records what the kernel's accounting says is left after each batch; then
// it samples as long again with no pods, for the machine's own drift. It
// asserts only that every pod ran and was cleaned up by the kubelet; the
// numbers are the result (make node-leak writes them to a CSV and plots
// them, docs/node.md).
func TestLeak(t *testing.T) {
	n := 4
	if v := os.Getenv(leakPodsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", leakPodsEnv, v)
		}
	}
	ctx := t.Context()
	var samples []leakSample
	// The order of the modes matters: dying cgroups of the first phase are
	// still being freed during the second. NODE_LEAK_ORDER=disk runs disk
	// mode first.
	phases := []struct {
		ns string
		m  mode
	}{{nsMemory, memoryMode}, {nsDisk, diskMode}}
	if os.Getenv(leakOrderEnv) == "disk" {
		phases[0], phases[1] = phases[1], phases[0]
	}
	for _, c := range phases {
		s, err := takeSample(c.m, 0)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
		for done := 0; done < n; {
			batch := min(leakParallel, n-done)
			var wg sync.WaitGroup
			errs := make([]error, batch)
			for j := range batch {
				wg.Go(func() { errs[j] = churnOne(ctx, c.ns, done+j) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			done += batch
			s, err := takeSample(c.m, done)
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, s)
		}
		first, last := samples[len(samples)-1-(n+leakParallel-1)/leakParallel], samples[len(samples)-1]
		t.Logf("%s mode, %d pods churned: /proc/cgroups memory num_cgroups %d -> %d, live cgroups under kubepods %d -> %d, kubepods shmem %d -> %d, cache %d -> %d",
			c.m, n, first.numCgroups, last.numCgroups, first.live, last.live, first.shmem, last.shmem, first.cache, last.cache)
		if last.live != first.live {
			t.Errorf("%s mode: %d memory cgroups under kubepods before the churn, %d after: the kubelet left pod cgroups", c.m, first.live, last.live)
		}
	}
	// Then as long again with no pods, sampled as often: how num_cgroups
	// moves with no churn (the machine is shared, and dying cgroups of the
	// churn are freed over time).
	idle := samples[len(samples)-1].at.Sub(samples[len(samples)-1-(n+leakParallel-1)/leakParallel].at)
	steps := (n + leakParallel - 1) / leakParallel
	for i := 0; i <= steps; i++ {
		if i > 0 {
			time.Sleep(idle / time.Duration(steps))
		}
		s, err := takeSample(idleMode, min(i*leakParallel, n))
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
	}
	first, last := samples[len(samples)-1-steps], samples[len(samples)-1]
	t.Logf("idle, %s: /proc/cgroups memory num_cgroups %d -> %d", idle.Round(time.Second), first.numCgroups, last.numCgroups)

	out := os.Getenv(leakOutEnv)
	if out == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# kernel %s, %s, a uv cache of %d files per pod, %d pods at a time\n", kernelRelease(), time.Now().UTC().Format(time.RFC3339), leakPackages*31, leakParallel)
	b.WriteString("mode,churned,num_cgroups,live_kubepods_cgroups,kubepods_cache,kubepods_shmem,kubepods_rss,kubepods_usage\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%s,%d,%d,%d,%d,%d,%d,%d\n", s.mode, s.churned, s.numCgroups, s.live, s.cache, s.shmem, s.rss, s.usage)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}
