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
)

// BuildWebhook builds cmd/webhook of the repository at root into
// dir/sandbox-webhook and returns its path. No race detector: the binary under
// test is the one users run.
func BuildWebhook(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "sandbox-webhook")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/webhook")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/webhook: %w\n%s", err, b)
	}
	return out, nil
}

// Run runs the sandbox-webhook binary with args and returns its stdout; a
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

// RunCommand runs the sandbox-webhook binary with args. A non-zero exit code
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
