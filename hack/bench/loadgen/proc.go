package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// process is a server loadgen started: the webhook or the floor.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	url     string
	logPath string
	// lifetimePeakKB is VmHWM before the first reset: the peak of start-up
	// and the first level.
	lifetimePeakKB int64
	resets         int
}

func startProcess(name string, args []string, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = harness.WithoutEnv(os.Environ(), "POD_NAMESPACE", "KUBECONFIG")
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logPath: logPath}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
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

// since returns the time since start and the process's CPU time since it
// read cpu0.
func (p *process) since(start time.Time, cpu0 time.Duration) (elapsed, cpu time.Duration, err error) {
	elapsed = time.Since(start)
	cpu1, err := p.cpu()
	return elapsed, cpu1 - cpu0, err
}

// stop sends SIGTERM and waits (SIGKILL after 20s).
func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// status returns a field of /proc/PID/status in kB (VmHWM, VmRSS).
func (p *process) status(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", field, v, err)
		}
		return kb, nil
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
}

// cpu returns the CPU time the process has used, user and system (from
// /proc/PID/stat, in clock ticks of 10ms).
func (p *process) cpu() (time.Duration, error) {
	return processCPU(p.cmd.Process.Pid)
}

func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime and stime, fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ticks) * tick, nil
}

// resetPeak makes VmHWM the current RSS (Linux: clear_refs 5), so that the
// next reading is the peak of what ran since.
func (p *process) resetPeak() error {
	if p.resets == 0 {
		hwm, err := p.status("VmHWM")
		if err != nil {
			return err
		}
		p.lifetimePeakKB = hwm
	}
	p.resets++
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0)
}

// webhookProcess says how to run `sandbox-webhook serve`.
type webhookProcess struct {
	binary, kubeconfig, certDir, policyDir, logDir string
	// cpus, when set, is the taskset -c CPU list the server runs on.
	cpus string
}

func (w webhookProcess) args(port, health, metrics int) []string {
	return []string{"serve",
		"--kubeconfig", w.kubeconfig,
		"--cert-dir", w.certDir,
		"--policy", w.policyDir,
		"--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", health),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metrics),
		"--exclude-namespace", "sandbox-webhook",
		"--shutdown-delay", "0s", "--idle-drain", "0s",
	}
}

// start starts the webhook and returns once /readyz answers 200.
func (w webhookProcess) start(ctx context.Context, name string) (*process, error) {
	p, _, err := w.run(ctx, name, 20*time.Millisecond)
	return p, err
}

// startup is one measured start: from just before the process is started
// to the first 200 from /readyz (polled every millisecond), and the peak
// RSS by then. The process is stopped afterwards.
type startup struct {
	ready  time.Duration
	peakKB int64
}

func (w webhookProcess) startup(ctx context.Context, i int) (startup, error) {
	p, d, err := w.run(ctx, fmt.Sprintf("startup-%d", i), time.Millisecond)
	if err != nil {
		return startup{}, err
	}
	defer p.stop()
	hwm, err := p.status("VmHWM")
	if err != nil {
		return startup{}, err
	}
	return startup{ready: d, peakKB: hwm}, nil
}

func (w webhookProcess) run(ctx context.Context, name string, poll time.Duration) (*process, time.Duration, error) {
	ports, err := testkit.FreePorts(3)
	if err != nil {
		return nil, 0, err
	}
	logPath := filepath.Join(w.logDir, "webhook-"+name+".log")
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	name, args := w.binary, w.args(ports[0], ports[1], ports[2])
	if w.cpus != "" {
		name, args = "taskset", append([]string{"-c", w.cpus, name}, args...)
	}
	p, err := startProcess(name, args, logPath)
	if err != nil {
		return nil, 0, err
	}
	p.url = fmt.Sprintf("https://127.0.0.1:%d/mutate-v1-pod", ports[0])
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := client.Get(readyz); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(start), nil
			}
		}
		if p.exited() {
			return nil, 0, fmt.Errorf("sandbox-webhook serve exited before it was ready; log:\n%s", tail(logPath))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, 0, errors.Join(ctx.Err(), fmt.Errorf("sandbox-webhook serve not ready after a minute; log:\n%s", tail(logPath)))
		}
		time.Sleep(poll)
	}
}

// buildFloors compiles the floor servers (hack/bench/loadgen/floor and
// hack/bench/loadgen/decodefloor) into dir.
func buildFloors(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", dir+"/", "./loadgen/floor", "./loadgen/decodefloor")
	cmd.Dir = filepath.Join(benchdata.Root(), "hack", "bench") // the bench tools' module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the floor servers: %w\n%s", err, b)
	}
	return nil
}

// startFloor starts a floor server on a free port.
func startFloor(ctx context.Context, binary, certDir, logPath string) (*process, error) {
	ports, err := testkit.FreePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := startProcess(binary, []string{"--cert-dir", certDir, "--address", addr}, logPath)
	if err != nil {
		return nil, err
	}
	p.url = "https://" + addr + "/mutate-v1-pod"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return p, nil
		}
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("%s did not start; log:\n%s", binary, tail(logPath))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
