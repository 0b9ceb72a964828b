package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// syncBuffer is an io.Writer safe for the server's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// buildServe builds the product binary, whose serve command the test runs
// in a process of its own, as in production.
func buildServe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandbox-webhook")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/webhook")
	// As the image and the e2e suite build it: the same settings reuse the
	// same compiled packages from the build cache (with cgo, every package
	// that imports net would be compiled a second time).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("building the webhook: %v\n%s", err, out)
	}
	return bin
}

// TestServeSelfManaged runs the real `serve` command with the certificate
// flags (one of them from its environment variable) in self-managed mode, as a
// user holding only Options.RBAC() and the namespace reads serve needs: the
// server turns ready and the apiserver's view of the webhook (the caBundle the
// rotator injected) verifies the certificate it serves; on SIGTERM it exits 0.
func TestServeSelfManaged(t *testing.T) {
	f := newSelfManagedFixture(t)
	admin := apiserver(t)
	user := userWithRules(t, admin, "-serve", f.options(""),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}})
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	port, health := testkit.FreePort(t), testkit.FreePort(t)
	args := []string{
		"serve",
		"--policy", filepath.Join("..", "examples", "policies", "memory"),
		"--kubeconfig", kubeconfigPath,
		"--cert-dir", filepath.Join(dir, "certs"),
		"--bind-address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(health),
		"--shutdown-delay", "0s", "--idle-drain", "0s",
		"--namespace", f.ns, "--cert-secret", f.secret, "--webhook-config", f.mwc,
		"--service-name", "sandbox-webhook", "--cert-extra-dns-name", "localhost",
	}

	child := exec.Command(buildServe(t), args...)
	// One certificate flag from its environment variable.
	child.Env = append(os.Environ(), "POD_NAMESPACE=", "SANDBOX_WEBHOOK_CERT_MODE=self-managed")
	stderr := &syncBuffer{}
	child.Stdout, child.Stderr = io.Discard, stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = child.Process.Kill()
			t.Logf("serve killed: %v", <-exited)
		}
	}()

	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz?verbose", health)
	testkit.WaitFor(t, "serve's /readyz", waitLimit, func() error {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("serve exited: %v\n%s", err, stderr.String())
		default:
		}
		resp, err := http.Get(readyz)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d: %s", resp.StatusCode, body)
		}
		for _, check := range []string{"cert-rotator", "cert-secret", "certificate"} {
			if !strings.Contains(string(body), "[+]"+check+" ok") {
				return fmt.Errorf("check %s missing from %s", check, body)
			}
		}
		return nil
	})

	bundles := f.caBundles(t)
	roots := x509.NewCertPool()
	if len(bundles) == 0 || !roots.AppendCertsFromPEM(bundles[0]) {
		t.Fatal("no caBundle in the webhook configuration")
	}
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatalf("TLS handshake with the caBundle: %v", err)
	}
	conn.Close()

	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	stopped = true
	if err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "forbidden") {
		t.Errorf("serve was refused something:\n%s", stderr.String())
	}
	if testing.Verbose() {
		t.Logf("serve's log:\n%s", stderr.String())
	}
}

// TestSetup: files mode sets nothing up; cert-manager mode adds its
// readiness check but leaves the certificate to --cert-dir; incomplete flags
// are refused.
func TestSetup(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // never contacted: nothing is started

	r, _, err := setup(context.Background(), &Options{Mode: ModeFiles}, cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.GetCertificate() != nil || len(r.ReadyChecks()) != 0 {
		t.Errorf("files mode set up a certificate or checks: %v", r.ReadyChecks())
	}

	o := &Options{Mode: ModeCertManager, Namespace: "ns", Certificate: "crt", Registerer: prometheus.NewRegistry()}
	if r, _, err = setup(context.Background(), o, cfg, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if r.GetCertificate() != nil {
		t.Error("cert-manager mode must leave the certificate to serve's certwatcher")
	}
	if _, ok := r.ReadyChecks()["cert-manager-certificate"]; !ok || len(r.ReadyChecks()) != 1 {
		t.Errorf("ReadyChecks = %v", r.ReadyChecks())
	}

	if _, _, err := setup(context.Background(), &Options{Mode: ModeSelfManaged}, cfg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "needs --cert-secret") {
		t.Errorf("Setup with incomplete flags: %v", err)
	}
}
