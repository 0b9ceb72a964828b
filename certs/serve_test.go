package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

	"github.com/sandbox-webhook/sandbox-webhook/server"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

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

// serveChildEnv, when set, makes the test binary run `serve` with the JSON list
// of arguments it holds instead of the tests (see TestMain): serve sets the
// process-wide loggers, so it gets a process of its own, as in production.
const serveChildEnv = "CERTS_TEST_SERVE_ARGS"

// runServeChild is the child's side: serve until SIGTERM.
func runServeChild(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := server.NewCommand(NewServeExtension())
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
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
	port, health := freePort(t), freePort(t)
	args, err := json.Marshal([]string{
		"--policy", filepath.Join("..", "examples", "policies", "memory"),
		"--kubeconfig", kubeconfigPath,
		"--cert-dir", filepath.Join(dir, "certs"),
		"--bind-address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(health),
		"--shutdown-delay", "0s",
		"--namespace", f.ns, "--cert-secret", f.secret, "--webhook-config", f.mwc,
		"--service-name", "sandbox-webhook", "--cert-extra-dns-name", "localhost",
	})
	if err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), serveChildEnv+"="+string(args), "POD_NAMESPACE=", server.EnvVar("cert-mode")+"=self-managed")
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
	waitFor(t, "serve's /readyz", func() error {
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

// TestServeExtensionApply: files mode leaves serve alone; cert-manager mode adds
// its readiness check and runnable but leaves the certificate to --cert-dir.
func TestServeExtensionApply(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // never contacted: nothing is started

	files := &ServeExtension{Options: &Options{Mode: ModeFiles}}
	o := server.Options{CertDir: t.TempDir(), RESTConfig: cfg}
	if err := files.Apply(context.Background(), &o); err != nil {
		t.Fatal(err)
	}
	if o.GetCertificate != nil || len(o.ReadyChecks) != 0 || len(o.Runnables) != 0 {
		t.Errorf("files mode changed serve's options: %+v", o)
	}

	cm := &ServeExtension{Options: &Options{Mode: ModeCertManager, Namespace: "ns", Certificate: "crt", Registerer: prometheus.NewRegistry()}}
	o = server.Options{CertDir: t.TempDir(), RESTConfig: cfg}
	if err := cm.Apply(context.Background(), &o); err != nil {
		t.Fatal(err)
	}
	if o.GetCertificate != nil {
		t.Error("cert-manager mode must leave the certificate to serve's certwatcher")
	}
	if _, ok := o.ReadyChecks["cert-manager-certificate"]; !ok || len(o.ReadyChecks) != 1 {
		t.Errorf("ReadyChecks = %v", o.ReadyChecks)
	}
	if _, ok := o.Runnables["certificates"]; !ok || len(o.Runnables) != 1 {
		t.Errorf("Runnables = %v", o.Runnables)
	}

	bad := &ServeExtension{Options: &Options{Mode: ModeSelfManaged}}
	if err := bad.Apply(context.Background(), &server.Options{RESTConfig: cfg}); err == nil || !strings.Contains(err.Error(), "needs --cert-secret") {
		t.Errorf("Apply with incomplete flags: %v", err)
	}
}
