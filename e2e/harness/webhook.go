package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// WebhookOptions says how to run `sandbox-webhook serve`.
type WebhookOptions struct {
	// Binary is the sandbox-webhook binary.
	Binary string
	// Kubeconfig is passed as --kubeconfig.
	Kubeconfig string
	// CertDir is passed as --cert-dir.
	CertDir string
	// Policies are passed as --policy, one flag each.
	Policies []string
	// LeakMitigation is passed as --leak-mitigation when set.
	LeakMitigation string
	// LeakMitigationFile is passed as --leak-mitigation-file when set.
	LeakMitigationFile string
	// ExcludeNamespaces are passed as --exclude-namespace, one flag each.
	ExcludeNamespaces []string
	// Args are appended to the command line.
	Args []string
	// Env are NAME=value pairs added to the process's environment, as a
	// container's env gives them.
	Env []string
	// Port is the webhook port when not 0 (e.g. one from testkit.FreePort, named in a
	// webhook.url before the process starts); otherwise a free one is picked.
	Port int
	// Log receives the process's stdout and stderr (JSON logs). Nil discards.
	Log io.Writer
}

// Webhook is a `sandbox-webhook serve` process on loopback ports. It can be
// stopped and started again on the same ports.
type Webhook struct {
	opts WebhookOptions
	// Port serves the webhook (TLS); MetricsPort /metrics; HealthPort
	// /healthz and /readyz.
	Port, MetricsPort, HealthPort int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd's exit error, set before done is closed
}

// StartWebhook picks free loopback ports and starts the webhook; it returns
// once /readyz answers 200.
func StartWebhook(ctx context.Context, o WebhookOptions) (*Webhook, error) {
	ports, err := testkit.FreePorts(4)
	if err != nil {
		return nil, err
	}
	if o.Port != 0 {
		// The other ports must differ from it: it is not held open.
		ports = slices.DeleteFunc(ports, func(p int) bool { return p == o.Port })
		ports = append([]int{o.Port}, ports...)
	}
	w := &Webhook{opts: o, Port: ports[0], MetricsPort: ports[1], HealthPort: ports[2]}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// URL is the webhook endpoint for clientConfig.url.
func (w *Webhook) URL() string {
	return fmt.Sprintf("https://127.0.0.1:%d/mutate-v1-pod", w.Port)
}

// Address is the webhook's host:port.
func (w *Webhook) Address() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(w.Port))
}

// Args returns the serve command line.
func (w *Webhook) Args() []string {
	o := w.opts
	args := []string{"serve",
		"--kubeconfig", o.Kubeconfig,
		"--cert-dir", o.CertDir,
		"--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(w.Port),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", w.MetricsPort),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", w.HealthPort),
		// Stops in tests are bounded by Stop's 30 s; the idle drain's own
		// test is TestIdleDrain.
		"--idle-drain", "1s",
	}
	for _, p := range o.Policies {
		args = append(args, "--policy", p)
	}
	if o.LeakMitigation != "" {
		args = append(args, "--leak-mitigation", o.LeakMitigation)
	}
	if o.LeakMitigationFile != "" {
		args = append(args, "--leak-mitigation-file", o.LeakMitigationFile)
	}
	for _, ns := range o.ExcludeNamespaces {
		args = append(args, "--exclude-namespace", ns)
	}
	return append(args, o.Args...)
}

// Start starts the process (again, after Stop) and waits until it is ready.
func (w *Webhook) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.cmd != nil {
		w.mu.Unlock()
		return errors.New("sandbox-webhook serve is already running")
	}
	cmd := exec.Command(w.opts.Binary, w.Args()...)
	out := w.opts.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so a Ctrl-C meant for the demo reaches the
	// webhook only through Stop, in order; and killed with its parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Keep the server's own view of its namespace out of the test's
	// environment; exclusions are given as flags.
	cmd.Env = append(WithoutEnv(os.Environ(), "POD_NAMESPACE", "KUBECONFIG"), w.opts.Env...)
	if err := cmd.Start(); err != nil {
		w.mu.Unlock()
		return fmt.Errorf("starting sandbox-webhook serve: %w", err)
	}
	done := make(chan struct{})
	w.cmd, w.done = cmd, done
	w.mu.Unlock()
	go func() {
		err := cmd.Wait()
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(done)
	}()
	return w.waitReady(ctx, done)
}

func (w *Webhook) waitReady(ctx context.Context, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", w.HealthPort)
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		select {
		case <-done:
			w.mu.Lock()
			err := w.err
			w.cmd = nil
			w.mu.Unlock()
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("sandbox-webhook serve exited before it was ready (last /readyz: %s): %w", last, err)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("sandbox-webhook serve not ready (last /readyz: %s)", last), w.Stop())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after 30s).
// A process that already exited is not an error.
func (w *Webhook) Stop() error {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		w.mu.Lock()
		w.cmd = nil
		w.mu.Unlock()
		return errors.New("sandbox-webhook serve did not exit within 30s of SIGTERM; killed")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cmd = nil
	var exit *exec.ExitError
	if w.err != nil && !errors.As(w.err, &exit) {
		return w.err
	}
	if exit != nil && exit.ExitCode() != 0 {
		return fmt.Errorf("sandbox-webhook serve exited on SIGTERM with %w", w.err)
	}
	return nil
}

// Running reports whether the process is running.
func (w *Webhook) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return false
	}
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// PID is the process id of the running process, or 0.
func (w *Webhook) PID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil || w.cmd.Process == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

// Metrics returns the Prometheus text exposition from /metrics.
func (w *Webhook) Metrics(ctx context.Context) (string, error) {
	return get(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", w.MetricsPort))
}

// Status returns the JSON of /status on the health port.
func (w *Webhook) Status(ctx context.Context) (string, error) {
	return get(ctx, fmt.Sprintf("http://127.0.0.1:%d/status", w.HealthPort))
}

// Readyz returns the status code of /readyz and its body.
func (w *Webhook) Readyz(ctx context.Context) (int, string, error) {
	return w.readyz(ctx, "/readyz")
}

// ReadyzVerbose returns the status code of /readyz?verbose and its body.
func (w *Webhook) ReadyzVerbose(ctx context.Context) (int, string, error) {
	return w.readyz(ctx, "/readyz?verbose")
}

func (w *Webhook) readyz(ctx context.Context, path string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", w.HealthPort, path), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func get(ctx context.Context, url string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// WithoutEnv returns env (as os.Environ gives it) without the variables
// names: a process started for a test must not see the test's own
// cluster settings.
func WithoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, n := range names {
			if len(kv) > len(n) && kv[:len(n)+1] == n+"=" {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
