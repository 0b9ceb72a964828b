package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// ca signs serving certificates for tests.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t testing.TB) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// issue returns PEM cert and key for 127.0.0.1 with the given serial and
// expiry.
func (c *ca) issue(t testing.TB, serial int64, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "sandbox-webhook"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write and rename, so a reader never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// policyYAML is a sandbox policy whose env var MARKER tells which version
// of the file an answer came from.
func policyYAML(marker string) string {
	return fmt.Sprintf(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: seed
spec:
  mode: memory
  match:
    podSelector:
      matchLabels:
        app: sandbox
  caches:
    - name: uv-cache
      mountPath: /root/.cache/uv
      sizeLimit: 1Gi
  env:
    - name: MARKER
      value: %q
  memory:
    limit: 8Gi
`, marker)
}

// testEnv is a server started on free ports with generated certificates,
// a policy directory and fake namespaces.
type testEnv struct {
	t          testing.TB
	ca         *ca
	certDir    string
	policyDir  string
	opts       Options
	srv        *server
	webhookURL string
	healthURL  string
	metricsURL string
	client     *http.Client
	cancel     context.CancelFunc
	done       chan error
}

func newTestEnv(t testing.TB, configure func(*Options)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	e := &testEnv{t: t, ca: newCA(t), certDir: filepath.Join(dir, "certs"), policyDir: filepath.Join(dir, "policies")}
	cert, key := e.ca.issue(t, 2, time.Now().Add(12*time.Hour))
	writeFile(t, filepath.Join(e.certDir, "tls.crt"), string(cert))
	writeFile(t, filepath.Join(e.certDir, "tls.key"), string(key))
	writeFile(t, filepath.Join(e.policyDir, "seed.yaml"), policyYAML("a"))

	e.opts = Options{
		PolicyPaths:    []string{e.policyDir},
		CertDir:        e.certDir,
		BindAddress:    "127.0.0.1",
		ReloadInterval: time.Hour, // file events alone must do
		ReadTimeout:    10 * time.Second,
		WriteTimeout:   30 * time.Second,
		KubeClient: fake.NewClientset(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandboxes"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own"}},
		),
		// The manager's: nothing it runs here talks to the apiserver.
		RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"},
		Logger:     zap.New(zap.WriteTo(newTestWriter(t)), zap.UseDevMode(true)),
	}
	e.pickPorts()
	if configure != nil {
		configure(&e.opts)
	}
	e.client = e.newClient(false)
	return e
}

// pickPorts chooses free ports for the webhook and the side servers.
func (e *testEnv) pickPorts() {
	port, health, metrics := testkit.FreePort(e.t), testkit.FreePort(e.t), testkit.FreePort(e.t)
	e.opts.Port = port
	e.opts.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", health)
	e.opts.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", metrics)
	e.webhookURL = fmt.Sprintf("https://127.0.0.1:%d%s", port, admission.Path)
	e.healthURL = fmt.Sprintf("http://127.0.0.1:%d", health)
	e.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
}

func (e *testEnv) webhookAddr() string {
	return fmt.Sprintf("127.0.0.1:%d", e.opts.Port)
}

// start runs the server and waits for its webhook listener; before, if
// given, may adjust the server first (tests swap the namespace lookup).
// A port taken by another process between picking and binding it is picked
// again.
func (e *testEnv) start(before func(*server)) {
	e.t.Helper()
	e.t.Cleanup(func() {
		if err := e.stop(); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	for attempt := 1; ; attempt++ {
		if err := e.opts.complete(); err != nil {
			e.t.Fatal(err)
		}
		s, err := newServer(context.Background(), &e.opts)
		if err != nil {
			e.t.Fatal(err)
		}
		if before != nil {
			before(s)
		}
		e.srv = s
		ctx, cancel := context.WithCancel(context.Background())
		e.cancel = cancel
		e.done = make(chan error, 1)
		go func() { e.done <- s.run(ctx) }()

		var runErr error
		listening := false
		testkit.WaitFor(e.t, "the webhook listener", time.Minute, testkit.Holds(func() bool {
			select {
			case runErr = <-e.done:
				return true
			default:
			}
			c, err := net.Dial("tcp", e.webhookAddr())
			if err == nil {
				c.Close()
				listening = true
			}
			return listening
		}))
		if listening {
			return
		}
		cancel()
		e.cancel = nil
		if runErr != nil && strings.Contains(runErr.Error(), "address already in use") && attempt < 5 {
			e.t.Logf("port clash, retrying: %v", runErr)
			e.pickPorts()
			continue
		}
		e.t.Fatalf("Run returned at start: %v", runErr)
	}
}

// stop cancels the server and waits for Run to return.
func (e *testEnv) stop() error {
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	e.cancel = nil
	return <-e.done
}

func (e *testEnv) newClient(disableKeepAlives bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: e.ca.pool},
		DisableKeepAlives:   disableKeepAlives,
		MaxIdleConnsPerHost: 64,
	}}
}

func (e *testEnv) get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *testEnv) waitReady() {
	e.t.Helper()
	testkit.WaitFor(e.t, "/readyz", time.Minute, testkit.Holds(func() bool {
		select {
		case err := <-e.done:
			e.cancel = nil
			e.t.Fatalf("Run returned: %v", err)
		default:
		}
		code, _ := e.get(e.healthURL + "/readyz")
		return code == http.StatusOK
	}))
}

func (e *testEnv) status() Status {
	e.t.Helper()
	code, body := e.get(e.healthURL + "/status")
	if code != http.StatusOK {
		e.t.Fatalf("/status: %d %s", code, body)
	}
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		e.t.Fatalf("/status: %v\n%s", err, body)
	}
	return st
}

// metrics returns the server's /metrics.
func (e *testEnv) metrics() []byte {
	e.t.Helper()
	_, body := e.get(e.metricsURL)
	return []byte(body)
}

// metric returns metric name, summed over the series whose labels include
// labels (each key=value), on the server's /metrics. No such series fails
// the test (testkit.Metric).
func (e *testEnv) metric(name string, labels ...string) float64 {
	e.t.Helper()
	v, err := testkit.Metric(e.metrics(), name, labels...)
	if err != nil {
		e.t.Fatalf("/metrics: %v", err)
	}
	return v
}

// sandboxPodJSON is the kit's sandbox pod as an AdmissionReview carries it.
var sandboxPodJSON = func() string {
	pod := testkit.SandboxPod("sandboxes", "p", testkit.Image("python:3.12-slim"))
	pod.APIVersion, pod.Kind = "v1", "Pod"
	b, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func reviewFor(t testing.TB, uid, ns, pod string) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("uid-" + uid),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: []byte(pod)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// admitResult is what one call to the webhook returned.
type admitResult struct {
	status int
	closed bool // the server asked to close the connection
	review admissionv1.AdmissionReview
	body   string
}

// admit posts one review; err is a transport error.
func (e *testEnv) admit(client *http.Client, body []byte) (admitResult, error) {
	req, err := http.NewRequest(http.MethodPost, e.webhookURL, bytes.NewReader(body))
	if err != nil {
		return admitResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return admitResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return admitResult{}, err
	}
	res := admitResult{status: resp.StatusCode, closed: resp.Close, body: string(b)}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &res.review); err != nil {
			return res, fmt.Errorf("decoding the answer: %w", err)
		}
	}
	return res, nil
}

// marker admits the sandbox pod and returns the MARKER env var its patch
// sets, failing on anything but a patched answer.
func (e *testEnv) marker(client *http.Client) string {
	e.t.Helper()
	res, err := e.admit(client, reviewFor(e.t, "m", "sandboxes", sandboxPodJSON))
	if err != nil {
		e.t.Fatal(err)
	}
	return markerOf(e.t, res)
}

func markerOf(t testing.TB, res admitResult) string {
	t.Helper()
	if res.status != http.StatusOK || res.review.Response == nil || !res.review.Response.Allowed {
		t.Fatalf("answer: HTTP %d %s", res.status, res.body)
	}
	m, err := patchMarker(res.review.Response.Patch)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// patchMarker finds the MARKER env var in a patch.
func patchMarker(patch []byte) (string, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return "", fmt.Errorf("patch %q: %w", patch, err)
	}
	for _, op := range ops {
		var envs []corev1.EnvVar
		var one corev1.EnvVar
		if json.Unmarshal(op.Value, &envs) == nil {
			for _, ev := range envs {
				if ev.Name == "MARKER" {
					return ev.Value, nil
				}
			}
		} else if json.Unmarshal(op.Value, &one) == nil && one.Name == "MARKER" {
			return one.Value, nil
		}
	}
	return "", fmt.Errorf("no MARKER in patch %s", patch)
}

// testWriter sends logs to the test log until the test ends.
type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func newTestWriter(t testing.TB) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
