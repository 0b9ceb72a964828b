package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func TestServe(t *testing.T) {
	e := newTestEnv(t, nil)
	e.start(nil)
	e.waitReady()

	if code, body := e.get(e.healthURL + "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if m := e.marker(e.client); m != "a" {
		t.Errorf("MARKER = %q", m)
	}
	res, err := e.admit(e.client, reviewFor(t, "x", "sandboxes", strings.Replace(sandboxPodJSON, `"app":"sandbox"`, `"app":"other"`, 1)))
	if err != nil || res.status != http.StatusOK || !res.review.Response.Allowed || len(res.review.Response.Patch) != 0 {
		t.Errorf("a non-sandbox pod: %v %d %s", err, res.status, res.body)
	}

	st := e.status()
	if !st.Ready || st.ShuttingDown || len(st.Policies.Policies) != 1 || st.Policies.Policies[0].Name != "seed" ||
		st.LeakMitigation.Mode != "policy" || st.LeakMitigation.From != "--leak-mitigation" {
		t.Errorf("/status = %+v", st)
	}
	if d := time.Until(st.Certificate.NotAfter); d < 11*time.Hour || d > 13*time.Hour {
		t.Errorf("certificate notAfter = %v", st.Certificate.NotAfter)
	}
	for _, name := range []string{checkWebhookServer, checkCertificate, checkPolicies, checkNamespaceCache, checkShutdown} {
		if st.Checks[name] != "ok" {
			t.Errorf("check %s = %q", name, st.Checks[name])
		}
	}

	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sandbox_webhook_admission_requests_total", []string{"outcome=mutated"}, 1},
		{"sandbox_webhook_admission_requests_total", []string{"outcome=unchanged"}, 1},
		{"sandbox_webhook_admission_duration_seconds_count", []string{"outcome=mutated"}, 1},
		{"sandbox_webhook_policy_hits_total", []string{"enforcement=enforce", "mode=memory", "policy=seed"}, 1},
		{"sandbox_webhook_policy_reloads_total", []string{"source=policies"}, 1},
		{"sandbox_webhook_policy_reload_errors_total", []string{"source=policies"}, 0},
		{"sandbox_webhook_policy_reload_last_success", []string{"source=policies"}, 1},
		{"sandbox_webhook_policy_set_info", []string{"hash=" + st.Policies.Hash}, 1},
		{"sandbox_webhook_leak_mitigation_info", []string{"mode=policy"}, 1},
		{"sandbox_webhook_certificate_not_after_timestamp_seconds", nil, float64(st.Certificate.NotAfter.Unix())},
	} {
		if got := e.metric(m.name, m.labels...); got != m.want {
			t.Errorf("%s%q = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	_, body := e.get(e.metricsURL)
	for _, name := range []string{"controller_runtime_webhook_requests_total", "go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	if err := e.stop(); err != nil {
		t.Errorf("Run returned %v", err)
	}
}

func TestTLSMinVersion(t *testing.T) {
	for _, tc := range []struct {
		min       uint16
		tls12Fine bool
	}{{tls.VersionTLS13, false}, {tls.VersionTLS12, true}} {
		t.Run(tls.VersionName(tc.min), func(t *testing.T) {
			e := newTestEnv(t, func(o *Options) { o.TLSMinVersion = tc.min })
			e.start(nil)
			e.waitReady()
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs: e.ca.pool, MaxVersion: tls.VersionTLS12,
			}}}
			_, err := e.admit(c, reviewFor(t, "x", "sandboxes", sandboxPodJSON))
			if (err == nil) != tc.tls12Fine {
				t.Errorf("TLS 1.2 client: err = %v", err)
			}
			// TLS 1.2 only with AEAD suites: a client offering nothing but
			// CBC suites finds none in common.
			cbc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs: e.ca.pool, MaxVersion: tls.VersionTLS12,
				CipherSuites: []uint16{
					tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
					tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
					tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
				},
			}}}
			if _, err := e.admit(cbc, reviewFor(t, "z", "sandboxes", sandboxPodJSON)); err == nil {
				t.Errorf("a TLS 1.2 client with only CBC cipher suites was answered")
			}
			// HTTP/2 is off: even a client that offers it speaks HTTP/1.1.
			h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.ca.pool}, ForceAttemptHTTP2: true}}
			resp, err := h2.Post(e.webhookURL, "application/json", bytes.NewReader(reviewFor(t, "y", "sandboxes", sandboxPodJSON)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 1 {
				t.Errorf("protocol %s", resp.Proto)
			}
		})
	}
}

func TestRequestBodyLimit(t *testing.T) {
	// 64 KiB, and the largest limit allowed.
	for _, limit := range []int{64 << 10, maxRequestBytesBound - 1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) { testRequestBodyLimit(t, limit) })
	}
}

func testRequestBodyLimit(t *testing.T, limit int) {
	e := newTestEnv(t, func(o *Options) {
		o.MaxRequestBytes = int64(limit)
		// Room to process a review of the limit (admission.Price).
		o.MaxBufferedBytes = max(32<<20, int64(limit)*30)
	})
	e.start(nil)
	e.waitReady()

	// A valid review padded with an annotation to a given size.
	sized := func(n int) []byte {
		base := reviewFor(t, "s", "sandboxes", sandboxPodJSON)
		pad := n - len(base) - len(`,"annotations":{"pad":""}`)
		pod := strings.Replace(sandboxPodJSON, `"labels"`, `"annotations":{"pad":"`+strings.Repeat("x", pad)+`"},"labels"`, 1)
		b := reviewFor(t, "s", "sandboxes", pod)
		if len(b) != n {
			t.Fatalf("sized review is %d bytes, want %d", len(b), n)
		}
		return b
	}
	if res, err := e.admit(e.client, sized(limit)); err != nil || res.status != http.StatusOK || !res.review.Response.Allowed {
		t.Fatalf("a review of exactly the limit: %v HTTP %d %s", err, res.status, res.body)
	}
	res, err := e.admit(e.client, sized(limit+1))
	if err != nil || res.status != http.StatusRequestEntityTooLarge || !strings.Contains(res.body, fmt.Sprintf("the limit is %d bytes (--max-request-bytes)", limit)) {
		t.Fatalf("a review over the limit: %v HTTP %d %q", err, res.status, res.body)
	}
	// Without Content-Length (chunked), the limit holds while reading.
	req, _ := http.NewRequest(http.MethodPost, e.webhookURL, io.MultiReader(bytes.NewReader(sized(limit+1))))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "--max-request-bytes") {
		t.Errorf("a chunked review over the limit: HTTP %d %q", resp.StatusCode, body)
	}
	if got := e.metric("sandbox_webhook_admission_requests_total", "outcome=error"); got != 2 {
		t.Errorf("errors counted: %v, want 2", got)
	}
}

func TestNotReadyUntilPoliciesLoad(t *testing.T) {
	e := newTestEnv(t, nil)
	writeFile(t, e.policyDir+"/seed.yaml", "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\nmetadata: {name: seed}\nspec: {bogus: 1}\n")
	e.start(nil)

	testkit.WaitFor(t, "the server to answer", time.Minute, testkit.Holds(func() bool {
		code, _ := e.get(e.healthURL + "/healthz")
		return code == http.StatusOK
	}))
	if code, body := e.get(e.healthURL + "/readyz"); code == http.StatusOK || !strings.Contains(body, "[-]policies failed") {
		t.Errorf("/readyz: %d %s", code, body)
	}
	st := e.status()
	if st.Ready || st.Policies.Loaded || len(st.Policies.Errors) == 0 || !strings.Contains(st.Policies.Errors[0], "bogus") {
		t.Errorf("/status = %+v", st)
	}
	testkit.WaitFor(t, "the webhook listener", time.Minute, testkit.Holds(func() bool {
		_, err := e.admit(e.client, reviewFor(t, "x", "sandboxes", sandboxPodJSON))
		return err == nil
	}))
	res, err := e.admit(e.client, reviewFor(t, "x", "sandboxes", sandboxPodJSON))
	if err != nil || res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "not ready") {
		t.Errorf("admission before policies load: %v HTTP %d %q", err, res.status, res.body)
	}

	writeFile(t, e.policyDir+"/seed.yaml", policyYAML("fixed"))
	e.waitReady()
	if m := e.marker(e.client); m != "fixed" {
		t.Errorf("MARKER = %q", m)
	}
}

func TestOptionsValidation(t *testing.T) {
	base := func() Options {
		return Options{PolicyPaths: []string{"p"}, CertDir: "c", Port: 9443, RESTConfig: nil, KubeClient: nil}
	}
	for _, tc := range []struct {
		name   string
		modify func(*Options)
		want   string
	}{
		{"no policy", func(o *Options) { o.PolicyPaths = nil }, "at least one --policy"},
		{"no kube", func(o *Options) {}, "no Kubernetes client configuration"},
		{"body limit above its bound", func(o *Options) { o.MaxRequestBytes = 8 << 20 }, "--max-request-bytes 8388608"},
		{"body limit at its bound", func(o *Options) { o.MaxRequestBytes = 7 << 20 }, "must be between 1 and 7340031"},
		{"bad leak mitigation", func(o *Options) { o.LeakMitigation = "maybe" }, `--leak-mitigation "maybe"`},
		{"TLS 1.1", func(o *Options) { o.TLSMinVersion = tls.VersionTLS11 }, "--tls-min-version"},
		{"bad port", func(o *Options) { o.Port = 70000 }, "--port 70000"},
		{"same side ports", func(o *Options) { o.MetricsBindAddress, o.HealthProbeBindAddress = ":1", ":1" }, "both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.modify(&o)
			err := o.complete()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	o := base()
	o.RESTConfig = newTestEnv(t, nil).opts.RESTConfig
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if o.TLSMinVersion != tls.VersionTLS13 || o.MaxRequestBytes != 3<<20 || o.LeakMitigation != mutate.LeakMitigationPolicy {
		t.Errorf("defaults: %+v", o)
	}
}

// TestPortInUse: a port that cannot be bound stops Run with the reason.
func TestPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name   string
		modify func(*Options)
		want   string
	}{
		{"health", func(o *Options) { o.HealthProbeBindAddress = taken.Addr().String() }, "listening for health probes"},
		{"metrics", func(o *Options) { o.MetricsBindAddress = taken.Addr().String() }, "listening for metrics"},
		{"webhook", func(o *Options) { o.Port = port }, "webhook server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, tc.modify)
			err := Run(context.Background(), e.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("Run = %v, want %q and address already in use", err, tc.want)
			}
		})
	}
}
