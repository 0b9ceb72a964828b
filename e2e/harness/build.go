package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// BuildWebhook builds cmd/webhook of the repository at root, the server
// (the container image's binary: serve, certs), into dir/sandbox-webhook
// and returns its path. No race detector: the binary under test is the one
// the image ships.
func BuildWebhook(ctx context.Context, root, dir string) (string, error) {
	return build(ctx, root, "./cmd/webhook", filepath.Join(dir, "sandbox-webhook"))
}

// BuildCLI builds cmd/kubectl-sandbox_webhook of the repository at root,
// the command line (dry-run, validate, test, check, export-map), into
// dir/kubectl-sandbox_webhook and returns its path.
func BuildCLI(ctx context.Context, root, dir string) (string, error) {
	return build(ctx, root, "./cmd/kubectl-sandbox_webhook", filepath.Join(dir, "kubectl-sandbox_webhook"))
}

// build builds the main package pkg of the repository at root into out.
//
// Builds are serialized across processes with a lock file under
// root/_output: test packages that run at once then compile the binary's
// dependencies once, the later builds finding them in the Go build cache.
func build(ctx context.Context, root, pkg, out string) (string, error) {
	unlock, err := lockFile(filepath.Join(root, "_output", ".build-webhook.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// Run runs a sandbox-webhook binary with args and returns its stdout; a
// non-zero exit is an error that carries stderr.
func Run(ctx context.Context, binary string, args ...string) ([]byte, error) {
	r, err := RunCommand(ctx, binary, args...)
	if err == nil && r.ExitCode != 0 {
		err = fmt.Errorf("sandbox-webhook %s: exit code %d\n%s", strings.Join(args, " "), r.ExitCode, r.Stderr)
	}
	return r.Stdout, err
}

// Result is what a command printed and how it exited.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// RunCommand runs a sandbox-webhook binary with args. A non-zero exit code
// is reported in the Result, not as an error; the error is for a command
// that could not run or was killed.
func RunCommand(ctx context.Context, binary string, args ...string) (Result, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: cmd.ProcessState.ExitCode()}
	var exit *exec.ExitError
	if errors.As(err, &exit) && r.ExitCode > 0 {
		err = nil
	}
	if err != nil {
		return r, fmt.Errorf("sandbox-webhook %s: %w\n%s", strings.Join(args, " "), err, r.Stderr)
	}
	return r, nil
}

// lockFile takes an exclusive advisory lock on path, creating it, and
// returns the function that releases it.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
