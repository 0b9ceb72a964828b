//go:build nodee2e

package harness

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// NodeTools are the commands StartNode runs besides bin/kubelet, all from
// Debian packages that hack/node-tools.sh installs.
var NodeTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "unshare", "nsenter"}

// kubeletSysctls are the kernel settings the kubelet insists on (it writes
// them unless protectKernelDefaults, which fails instead). The node's mount
// namespace gets files with these values bind-mounted over /proc/sys, so the
// kubelet is content and the machine's own settings are never touched.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hiddenDirs get an empty tmpfs in the node's mount namespace: the kubelet
// writes /var/lib/kubelet/device-plugins and /var/log/containers whatever
// its configuration says, and containerd and its shims /run/containerd.
var hiddenDirs = []string{"/run", "/var/lib", "/var/log"}

// NodeOptions says how to run a node.
type NodeOptions struct {
	// Name is the node's name; it also names the node's cgroup root.
	Name string
	// Dir holds every file of the node: containerd's and the kubelet's
	// state, configuration and logs. It should be on the repository's
	// _output, so nothing is written elsewhere on the machine.
	Dir string
	// Kubelet is the kubelet binary (bin/kubelet, hack/tools.sh kubelet).
	Kubelet string
	// Busybox is a static busybox (Debian's busybox-static) for the image.
	Busybox string
	// Kubeconfig is the kubelet's kubeconfig.
	Kubeconfig string
	// NodeIP is the node's address (--node-ip); empty is 127.0.0.1.
	NodeIP string
	// CNIConfList, when set, is the pod network's CNI configuration
	// (a .conflist), with the plugins in CNIBinDir. Without it pods run
	// only with hostNetwork.
	CNIConfList, CNIBinDir string
	// Images are more OCI archives to import into containerd.
	Images []string
	// NetNS, when set, is the named network namespace (ip netns) the node
	// runs in: its own interfaces, routes, iptables and loopback. The
	// kubelet then listens on NodeIP, where the test can reach it.
	NetNS string
	// RegistryMirrors send containerd's pulls of a registry host (such as
	// 127.0.0.1:5000, which is the node's own loopback in NetNS) to another
	// endpoint (http://host:port), as kind's local registry does.
	RegistryMirrors map[string]string
}

// Node is containerd and a kubelet registered as a node, both local
// processes. They share a private mount namespace of their own: every mount
// they make (pod volumes, container root filesystems) lives and dies with
// it, and the kubelet's kernel settings are fakes inside it. Cgroups are the
// machine's: pods get memory cgroups under CgroupRoot, as on a real node.
type Node struct {
	opts NodeOptions
	// CgroupRoot is the kubelet's cgroupRoot: pod cgroups are
	// <hierarchy>/<CgroupRoot>/kubepods/...
	CgroupRoot string
	// Socket is containerd's gRPC socket.
	Socket string
	// KubeletRoot is the kubelet's --root-dir (pod volumes are under
	// pods/<uid>/volumes).
	KubeletRoot string

	containerd, kubelet *process
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// CheckNodeTools reports an error that says how to fix it when a command the
// node needs is missing.
func CheckNodeTools(kubelet string) error {
	var missing []string
	if _, err := os.Stat(kubelet); err != nil {
		missing = append(missing, kubelet+" (hack/tools.sh kubelet)")
	}
	for _, t := range NodeTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run hack/node-tools.sh (as root)", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("a node runs containers: it needs root")
	}
	return nil
}

// StartNode starts containerd, imports the node image and starts the
// kubelet. It returns once the kubelet answers /healthz; the Node object
// appears in the API soon after (WaitNode). On error everything started is
// stopped again.
func StartNode(ctx context.Context, o NodeOptions) (n *Node, err error) {
	if err := CheckNodeTools(o.Kubelet); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	n = &Node{
		opts:        o,
		CgroupRoot:  "/sandbox-webhook-" + o.Name,
		Socket:      filepath.Join(dir, "containerd", "containerd.sock"),
		KubeletRoot: filepath.Join(dir, "kubelet", "root"),
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
		}
	}()
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "containerd/runc", "cni/bin", "cni/conf", "kubelet/root", "kubelet/logs", "kubelet/plugins", "sysctl", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return n, err
		}
	}
	if err := n.makeCgroupRoot(); err != nil {
		return n, err
	}
	image := filepath.Join(dir, "image.tar")
	if err := WriteBusyboxImage(o.Busybox, image); err != nil {
		return n, err
	}

	// containerd, in a new private mount namespace with the kubelet's
	// sysctls faked in it.
	if o.CNIConfList != "" {
		if err := os.WriteFile(filepath.Join(dir, "cni", "conf", "10-pods.conflist"), []byte(o.CNIConfList), 0o644); err != nil {
			return n, err
		}
	}
	cfg := filepath.Join(dir, "containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(n.containerdConfig()), 0o644); err != nil {
		return n, err
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, k := range slices.Sorted(maps.Keys(kubeletSysctls)) {
		f := filepath.Join(dir, "sysctl", strings.ReplaceAll(k, "/", "."))
		if err := os.WriteFile(f, []byte(kubeletSysctls[k]+"\n"), 0o644); err != nil {
			return n, err
		}
		fmt.Fprintf(&script, "mount --bind %s /proc/sys/%s\n", f, k)
	}
	// The paths the kubelet and containerd hard-code are written in the
	// namespace only (unless the node's own directory is under one).
	for _, p := range hiddenDirs {
		if !strings.HasPrefix(dir+"/", p+"/") {
			fmt.Fprintf(&script, "mount -t tmpfs -o mode=0755 node-%s %s\n", filepath.Base(p), p)
		}
	}
	fmt.Fprintf(&script, "exec containerd --config %s\n", cfg)
	n.containerd, err = n.start("containerd", n.inNetNS("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script.String())...)
	if err != nil {
		return n, err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return n, err
	}
	for _, img := range append([]string{image}, o.Images...) {
		if out, err := n.Ctr(ctx, "images", "import", img); err != nil {
			return n, fmt.Errorf("importing %s: %w\n%s", img, err, out)
		}
	}

	// The kubelet, in containerd's mount namespace.
	ports, err := testkit.FreePorts(2)
	if err != nil {
		return n, err
	}
	kcfg := filepath.Join(dir, "kubelet", "config.yaml")
	if err := os.WriteFile(kcfg, []byte(n.kubeletConfig(ports[0], ports[1])), 0o644); err != nil {
		return n, err
	}
	n.kubelet, err = n.start("kubelet", "nsenter", "--target", strconv.Itoa(n.containerd.cmd.Process.Pid), "--mount", "--net", "--",
		o.Kubelet,
		"--config", kcfg,
		"--kubeconfig", o.Kubeconfig,
		"--root-dir", n.KubeletRoot,
		"--cert-dir", filepath.Join(dir, "kubelet", "pki"),
		"--volume-plugin-dir", filepath.Join(dir, "kubelet", "plugins"),
		"--hostname-override", o.Name,
		"--node-ip", cmp.Or(o.NodeIP, "127.0.0.1"),
		"--v", "2",
	)
	if err != nil {
		return n, err
	}
	return n, n.waitHealthy(ctx, ports[1])
}

// inNetNS prefixes a command so that it runs in the node's network
// namespace, if it has one: nsenter, not `ip netns exec`, which mounts a
// sysfs of its own over /sys and so hides the cgroup hierarchies from the
// kubelet.
func (n *Node) inNetNS(args ...string) []string {
	if n.opts.NetNS == "" {
		return args
	}
	return append([]string{"nsenter", "--net=/run/netns/" + n.opts.NetNS, "--"}, args...)
}

// listenAddress is where the kubelet serves and answers health checks:
// the loopback, which the test shares, unless the node has a network
// namespace of its own.
func (n *Node) listenAddress() string {
	if n.opts.NetNS == "" {
		return "127.0.0.1"
	}
	return n.opts.NodeIP
}

func (n *Node) containerdConfig() string {
	d := filepath.Join(n.opts.Dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[6]q
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    # No CAP_SYS_RESOURCE in these machines: a container may not get a lower
    # oom_score_adj than containerd's own (the sandbox asks for -998).
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = %[7]q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[8]q
      conf_dir = %[9]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.Socket, n.Socket+".ttrpc",
		filepath.Join(d, "opt"), NodeImage, filepath.Join(d, "runc"),
		cmp.Or(n.opts.CNIBinDir, filepath.Join(n.opts.Dir, "cni", "bin")), filepath.Join(n.opts.Dir, "cni", "conf")) +
		n.mirrorsConfig()
}

// mirrorsConfig is containerd's CRI registry mirrors for RegistryMirrors.
func (n *Node) mirrorsConfig() string {
	var b strings.Builder
	for _, host := range slices.Sorted(maps.Keys(n.opts.RegistryMirrors)) {
		fmt.Fprintf(&b, "    [plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.%q]\n      endpoint = [%q]\n", host, n.opts.RegistryMirrors[host])
	}
	return b.String()
}

func (n *Node) kubeletConfig(port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 machines: the kubelet refuses them unless told, and the
# runtime's driver there is cgroupfs.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[6]s
port: %[3]d
readOnlyPort: 0
healthzBindAddress: %[6]s
healthzPort: %[4]d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
failSwapOn: false
podLogsDir: %[5]s
# The machine is shared: never evict or garbage-collect images because of
# what others do to its disk and memory.
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
  imagefs.inodesFree: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
`, n.CgroupRoot, n.Socket, port, healthzPort, filepath.Join(n.opts.Dir, "kubelet", "logs"), n.listenAddress())
}

func (n *Node) start(name string, args ...string) (*process, error) {
	return startProcess(filepath.Join(n.opts.Dir, "logs", name+".log"), name, args...)
}

// startProcess starts a daemon with its output in logPath.
func startProcess(logPath, name string, args ...string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = WithoutEnv(os.Environ(), "KUBECONFIG")
	// Killed with its parent: a test killed by its timeout leaves no daemon
	// behind (the shims and containers are cleaned up by the next Stop).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits, SIGKILL after grace.
func (p *process) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	defer p.log.Close()
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, grace)
	}
}

// Log returns the log file of the node's containerd or kubelet.
func (n *Node) Log(name string) string {
	return filepath.Join(n.opts.Dir, "logs", name+".log")
}

func (n *Node) waitContainerd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if n.containerd.exited() {
			return fmt.Errorf("containerd exited; see %s", n.Log("containerd"))
		}
		if _, err := n.Ctr(ctx, "version"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s; see %s", n.Socket, n.Log("containerd"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *Node) waitHealthy(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	url := fmt.Sprintf("http://%s/healthz", net.JoinHostPort(n.listenAddress(), strconv.Itoa(port)))
	for {
		if n.kubelet.exited() {
			return fmt.Errorf("the kubelet exited; see %s", n.Log("kubelet"))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the kubelet is not healthy; see %s", n.Log("kubelet"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Ctr runs containerd's ctr against the node's containerd, in the CRI's
// namespace, and returns its combined output. It runs in the node's mount
// namespace: ctr hands the shims fifos it creates under /run/containerd.
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	if n.containerd == nil || n.containerd.exited() {
		return nil, errors.New("containerd is not running")
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(n.containerd.cmd.Process.Pid), "--mount", "--",
		"ctr", "--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

// Exec runs a busybox shell script in a running container (by its
// containerd id) and returns what it printed, and the error of a non-zero
// exit.
func (n *Node) Exec(ctx context.Context, containerID, script string) (string, error) {
	id := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	out, err := n.Ctr(ctx, "tasks", "exec", "--exec-id", id, containerID, "/bin/sh", "-c", script)
	return string(out), err
}

// MountInfo returns the node's mount table (its mount namespace's), as
// /proc/<pid>/mountinfo lines.
func (n *Node) MountInfo() ([]string, error) {
	if n.containerd == nil || n.containerd.exited() {
		return nil, errors.New("the node is not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", n.containerd.cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n"), nil
}

// Cgroup returns the path of the node's cgroup rel (e.g.
// "kubepods/burstable/pod<uid>") in hierarchy (e.g. "memory").
func (n *Node) Cgroup(hierarchy, rel string) string {
	return filepath.Join("/sys/fs/cgroup", hierarchy, n.CgroupRoot, rel)
}

// cgroupHierarchies returns the mount points of the machine's cgroup
// hierarchies: the v1 ones, and the v2 one that a hybrid setup mounts
// alongside (runc creates the containers' cgroups there too).
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") {
				out = append(out, fields[4])
			}
		}
	}
	return out, s.Err()
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy (the
// kubelet requires it to exist), with cpuset's cpus and mems from the root.
func (n *Node) makeCgroupRoot() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	if len(hs) == 0 {
		return errors.New("no cgroup v1 hierarchies mounted: the node e2e needs cgroup v1 with the memory controller")
	}
	for _, h := range hs {
		d := filepath.Join(h, n.CgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating the node's cgroup root: %w", err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("setting %s of the node's cgroup root: %w", f, err)
				}
			}
		}
	}
	return nil
}

// Stop stops the kubelet, then every container containerd still runs, then
// containerd and its shims, kills whatever is left in the node's cgroups and
// removes them, and removes the node's state (its logs stay). Stopping a
// node that did not start, or twice, is fine.
func (n *Node) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	if n.kubelet != nil {
		errs = append(errs, n.kubelet.stop(30*time.Second))
	}
	if n.containerd != nil && !n.containerd.exited() {
		// Containers are the shims' children: a dead shim would leave them
		// running. Kill and delete them through containerd first.
		if out, err := n.Ctr(ctx, "tasks", "ls", "--quiet"); err == nil {
			for _, id := range strings.Fields(string(out)) {
				_, _ = n.Ctr(ctx, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
				_, _ = n.Ctr(ctx, "tasks", "delete", "--force", id)
			}
		}
		if out, err := n.Ctr(ctx, "containers", "ls", "--quiet"); err == nil {
			for _, id := range strings.Fields(string(out)) {
				_, _ = n.Ctr(ctx, "containers", "delete", id)
			}
		}
		errs = append(errs, n.containerd.stop(30*time.Second))
	}
	// Shims outlive containerd by design; they name its socket.
	errs = append(errs, killProcesses(func(pid int, cmdline string) bool {
		return strings.Contains(cmdline, n.Socket)
	}))
	errs = append(errs, n.removeCgroups())
	for _, d := range []string{"containerd", "kubelet/root", "kubelet/pki", "kubelet/plugins", "cni", "sysctl", "image.tar"} {
		if err := os.RemoveAll(filepath.Join(n.opts.Dir, d)); err != nil {
			errs = append(errs, err)
		}
	}
	n.kubelet, n.containerd = nil, nil
	return errors.Join(errs...)
}

// removeCgroups kills what is left in the node's cgroups and removes them,
// deepest first, in every hierarchy.
func (n *Node) removeCgroups() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, n.CgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		slices.Reverse(dirs)
		for _, d := range dirs {
			var err error
			for range 50 {
				if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killProcesses SIGKILLs the processes whose command line match selects.
func killProcesses(match func(pid int, cmdline string) bool) error {
	pids, err := findProcesses(match)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return err
}

func findProcesses(match func(pid int, cmdline string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(pid, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Leftovers lists what a stopped node left on the machine: processes that
// name its directory or socket, mounts under its directory, and its cgroups.
// Empty after a clean Stop.
func (n *Node) Leftovers() ([]string, error) {
	var out []string
	pids, err := findProcesses(func(pid int, cmdline string) bool {
		return strings.Contains(cmdline, n.opts.Dir)
	})
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d: %s", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == n.opts.Dir || strings.HasPrefix(f[4], n.opts.Dir+"/")) {
			out = append(out, "mount "+f[4])
		}
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, n.CgroupRoot)); err == nil {
			out = append(out, "cgroup "+filepath.Join(h, n.CgroupRoot))
		}
	}
	return out, nil
}
