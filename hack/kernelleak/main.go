// Command kernelleak measures what sandbox-pod churn leaves in the kernel
// with the uv cache on tmpfs (memory mode) and on the node's disk (leak
// mitigation): dying memory cgroups, percpu and slab memory. It runs as the
// init of a QEMU guest booted on a distribution kernel (hack/kernel-leak.sh
// boots it), or on the machine's own kernel in a mount namespace of its own:
//
//	kernelleak churn --mode memory|disk --pods N --files N --node-dir DIR
//	kernelleak initramfs --modules DIR --load a,b --out FILE
//
// It prints one CSV row per sample (see header), each starting with "kl,".
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	var err error
	switch {
	case os.Getpid() == 1:
		err = guest()
		fmt.Fprintf(os.Stdout, "kl-done,%v\n", err)
		syscall.Sync()
		_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	case len(os.Args) > 1 && os.Args[1] == "write":
		err = writeMain(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "churn":
		err = hostMain(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "initramfs":
		err = initramfsMain(os.Args[2:])
	default:
		err = errors.New("usage: kernelleak churn|initramfs ... (see the package comment)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kernelleak:", err)
		os.Exit(1)
	}
}

// hostMain runs one experiment on the machine's own kernel, in a mount
// namespace of its own: its tmpfs mounts never appear in the machine's.
func hostMain(args []string) error {
	fs := flag.NewFlagSet("churn", flag.ContinueOnError)
	e := experiment{out: os.Stdout}
	fs.StringVar(&e.mode, "mode", "memory", "memory (tmpfs uv cache) or disk")
	fs.IntVar(&e.pods, "pods", 100, "pods to churn")
	fs.IntVar(&e.files, "files", 1500, "files in each pod's uv cache")
	fs.IntVar(&e.every, "every", 10, "sample every so many pods")
	fs.IntVar(&e.run, "run", 1, "the run's number, for the rows")
	fs.DurationVar(&e.wait, "wait", time.Minute, "wait after the churn")
	fs.StringVar(&e.nodeDir, "node-dir", "", "directory standing for /var/lib/kubelet (on the node's disk)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if e.mode != "memory" && e.mode != "disk" {
		return fmt.Errorf("--mode %q: want memory or disk", e.mode)
	}
	if e.nodeDir == "" {
		return errors.New("--node-dir is required")
	}
	if os.Getenv(inNamespace) == "" {
		return inOwnMountNamespace()
	}
	e.kernel = release()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		e.v2 = true
		e.cgroups = fmt.Sprintf("/sys/fs/cgroup/kernelleak-%d", os.Getpid())
	} else {
		e.cgroups = fmt.Sprintf("/sys/fs/cgroup/memory/kernelleak-%d", os.Getpid())
	}
	fmt.Println(header)
	return e.Run()
}

// inNamespace is set in the environment of the copy of this program that
// runs in its own mount namespace.
const inNamespace = "KERNELLEAK_OWN_MOUNT_NAMESPACE"

// inOwnMountNamespace runs this program again with the same arguments in a
// new mount namespace, every mount in it private (Go's os/exec makes them
// so when it unshares the mount namespace).
func inOwnMountNamespace() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), inNamespace+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return cmd.Run()
}

// guest is the init of the QEMU guest: it mounts what the experiment
// needs, loads the modules for the node's disk (virtio, ext4), mounts the
// disk (an ext4 file system made for this boot) as the node's
// /var/lib/kubelet, and runs the experiment the kernel command line
// describes (kl.mode, kl.pods, kl.files, kl.every, kl.wait, kl.run).
func guest() error {
	for _, m := range []struct{ src, dir, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		if err := syscall.Mount(m.src, m.dir, m.fs, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	if err := loadModules("/modules"); err != nil {
		return err
	}
	if err := syscall.Mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, ""); err != nil {
		return fmt.Errorf("mount cgroup2: %w", err)
	}
	var err error
	for range 100 {
		if err = syscall.Mount("/dev/vda", "/node", "ext4", 0, ""); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("mount /dev/vda: %w", err)
	}
	defer func() { _ = syscall.Unmount("/node", 0) }()
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	opts := map[string]string{}
	for _, f := range strings.Fields(string(cmdline)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "kl.") {
			opts[strings.TrimPrefix(k, "kl.")] = v
		}
	}
	e := experiment{kernel: release(), mode: opts["mode"], nodeDir: "/node", cgroups: "/sys/fs/cgroup/kubepods", v2: true, out: os.Stdout}
	for k, p := range map[string]*int{"pods": &e.pods, "files": &e.files, "every": &e.every, "run": &e.run} {
		if *p, err = strconv.Atoi(opts[k]); err != nil {
			return fmt.Errorf("kl.%s: %w", k, err)
		}
	}
	if e.wait, err = time.ParseDuration(opts["wait"]); err != nil {
		return fmt.Errorf("kl.wait: %w", err)
	}
	if err := enableMemory("/sys/fs/cgroup"); err != nil {
		return err
	}
	fmt.Println(header)
	return e.Run()
}

// loadModules loads the modules the initramfs holds, in the order of its
// order file (dependencies first). A compressed module is handed to the
// kernel to decompress.
func loadModules(dir string) error {
	order, err := os.ReadFile(filepath.Join(dir, "order"))
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(order)) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		flags := 0
		if strings.HasSuffix(name, ".xz") {
			flags = 4 // MODULE_INIT_COMPRESSED_FILE
		}
		params, _ := syscall.BytePtrFromString("")
		_, _, errno := syscall.Syscall(sysFinitModule, f.Fd(), uintptr(unsafe.Pointer(params)), uintptr(flags))
		f.Close()
		if errno != 0 && errno != syscall.EEXIST {
			return fmt.Errorf("load %s: %w", name, errno)
		}
	}
	return nil
}

// release is the running kernel's release (uname -r).
func release() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(bytes.TrimSpace(b))
}

// sysFinitModule is finit_module(2) on amd64, the guests' architecture
// (package syscall does not name it).
const sysFinitModule = 313
