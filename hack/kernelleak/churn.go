package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// experiment is one run: pods sandbox pods churned in one mode, each
// writing a uv cache of files files, as the kubelet sets them up and tears
// them down, with the kernel's accounting sampled as it goes.
type experiment struct {
	kernel string // the label of the rows: the kernel's release
	mode   string // memory (tmpfs uv cache) or disk (leak mitigation)
	run    int
	pods   int
	files  int
	every  int           // sample every so many pods
	wait   time.Duration // after the churn, before the last two samples
	// nodeDir stands for /var/lib/kubelet: the pods' directories, and in
	// disk mode their uv caches, are made there.
	nodeDir string
	// cgroups is where the pods' memory cgroups are made: a pod cgroup
	// with a container cgroup in it, as the kubelet makes them.
	cgroups string
	// v2 is true on the unified hierarchy, whose cgroup.stat counts the
	// dying descendants of cgroups; on v1 they are counted machine-wide,
	// as /proc/cgroups' memory num_cgroups less its count at the start.
	v2  bool
	out io.Writer
}

const header = "kernel,mode,run,phase,pods,dying,num_cgroups,percpu_kib,slab_kib,sunreclaim_kib,shmem_kib,cached_kib"

// sample is the kernel's accounting at one point of a run.
type sample struct {
	phase string
	pods  int
	// dying: memory cgroups removed by the churn and not yet freed.
	dying      int64
	numCgroups int64
	meminfo    map[string]int64
}

func (e *experiment) sample(phase string, pods int, base int64) (sample, error) {
	s := sample{phase: phase, pods: pods}
	var err error
	if s.numCgroups, err = memoryCgroups(); err != nil {
		return s, err
	}
	if e.v2 {
		st, err := keyValues(filepath.Join(e.cgroups, "cgroup.stat"))
		if err != nil {
			return s, err
		}
		s.dying = st["nr_dying_descendants"]
	} else {
		s.dying = s.numCgroups - base
	}
	if s.meminfo, err = keyValues("/proc/meminfo"); err != nil {
		return s, err
	}
	m := s.meminfo
	fmt.Fprintf(e.out, "kl,%s,%s,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d\n", e.kernel, e.mode, e.run, s.phase, s.pods,
		s.dying, s.numCgroups, m["Percpu:"], m["Slab:"], m["SUnreclaim:"], m["Shmem:"], m["Cached:"])
	return s, nil
}

// Run churns the pods, then samples after the churn, after the wait and
// after dropping the page cache and reclaimable slab.
func (e *experiment) Run() error {
	if err := os.MkdirAll(e.cgroups, 0o755); err != nil {
		return err
	}
	defer os.Remove(e.cgroups)
	if e.v2 {
		if err := enableMemory(e.cgroups); err != nil {
			return err
		}
	}
	// Start from dropped caches, so that what other cgroups left is not
	// freed during the run (on v1 the count is machine-wide).
	if err := dropCaches(); err != nil {
		return err
	}
	base, err := memoryCgroups()
	if err != nil {
		return err
	}
	if _, err := e.sample("churn", 0, base); err != nil {
		return err
	}
	for i := 1; i <= e.pods; i++ {
		if err := e.churnOne(i); err != nil {
			return fmt.Errorf("pod %d: %w", i, err)
		}
		if i%e.every == 0 || i == e.pods {
			if _, err := e.sample("churn", i, base); err != nil {
				return err
			}
		}
	}
	time.Sleep(e.wait)
	if _, err := e.sample("waited", e.pods, base); err != nil {
		return err
	}
	if err := dropCaches(); err != nil {
		return err
	}
	_, err = e.sample("dropped", e.pods, base)
	return err
}

// dropCaches writes dirty pages back and drops the page cache and the
// reclaimable slab (dentries, inodes), then gives the kernel's workers
// two seconds to free the memory cgroups that held only those.
func dropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	return nil
}

// churnOne is one pod's life as far as the kernel sees it: the kubelet makes
// the pod's cgroups and its uv-cache volume (a tmpfs mounted on the pod's
// directory in memory mode, the directory itself on the node's disk in disk
// mode), the container writes its cache and exits, and the kubelet removes
// the container's cgroup, tears the volume down, removes the pod's
// directory and then the pod's cgroup (it keeps a pod's cgroup until its
// volumes are gone, so that what they hold is not moved to the parent).
func (e *experiment) churnOne(i int) error {
	pod := filepath.Join(e.cgroups, fmt.Sprintf("pod%d", i))
	ctr := filepath.Join(pod, "ctr")
	if err := os.Mkdir(pod, 0o755); err != nil {
		return err
	}
	if e.v2 {
		if err := enableMemory(pod); err != nil {
			return err
		}
	}
	if err := os.Mkdir(ctr, 0o755); err != nil {
		return err
	}
	podDir := filepath.Join(e.nodeDir, "pods", fmt.Sprintf("pod%d", i))
	vol := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "uv-cache")
	if err := os.MkdirAll(vol, 0o750); err != nil {
		return err
	}
	if e.mode == "memory" {
		if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, "size=1073741824"); err != nil {
			return fmt.Errorf("mount tmpfs: %w", err)
		}
	}
	if err := e.write(ctr, vol, uint64(e.run)<<32|uint64(i)); err != nil {
		return err
	}
	if err := rmdir(ctr); err != nil {
		return err
	}
	if e.mode == "memory" {
		if err := syscall.Unmount(vol, 0); err != nil {
			return fmt.Errorf("unmount tmpfs: %w", err)
		}
	}
	if err := os.RemoveAll(podDir); err != nil {
		return err
	}
	return rmdir(pod)
}

// write runs the container: this program's write command, moved into the
// container's cgroup before it writes anything.
func (e *experiment) write(cgroup, dir string, seed uint64) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "write", dir, strconv.Itoa(e.files), strconv.FormatUint(seed, 10))
	start, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	err = os.WriteFile(filepath.Join(cgroup, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0)
	start.Close()
	if werr := cmd.Wait(); werr != nil && err == nil {
		err = fmt.Errorf("writer: %w: %s", werr, stderr.Bytes())
	}
	return err
}

// writeMain is the container: it waits until it is in its cgroup (its
// standard input closes), then writes the uv cache.
func writeMain(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: write DIR FILES SEED")
	}
	files, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	seed, err := strconv.ParseUint(args[2], 10, 64)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return err
	}
	_, _, err = uvCache(args[0], files, seed)
	return err
}

// rmdir removes a cgroup, retrying while the kernel still counts a task
// that has exited in it.
func rmdir(dir string) error {
	var err error
	for range 100 {
		if err = os.Remove(dir); !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// enableMemory turns the memory controller on for the children of a v2
// cgroup.
func enableMemory(cgroup string) error {
	return os.WriteFile(filepath.Join(cgroup, "cgroup.subtree_control"), []byte("+memory"), 0)
}

// memoryCgroups is /proc/cgroups' num_cgroups of the memory controller:
// every memory cgroup of the kernel, the dying ones included.
func memoryCgroups() (int64, error) {
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "memory" {
			return strconv.ParseInt(f[2], 10, 64)
		}
	}
	return 0, errors.New("/proc/cgroups: no memory controller")
}

// keyValues reads a file of "key value [unit]" lines (cgroup.stat,
// /proc/meminfo) into a map keyed by the first field.
func keyValues(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 {
			if v, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
				m[fs[0]] = v
			}
		}
	}
	return m, sc.Err()
}
