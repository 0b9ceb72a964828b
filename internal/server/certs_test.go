package server

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestCertificateRotation replaces the serving certificate the way the
// kubelet updates a mounted Secret (a ..data symlink swap, the old directory
// removed) while clients hammer the server, some on keep-alive connections,
// some with a new TLS handshake per request. No request may fail, and new
// connections must get the new certificate.
func TestCertificateRotation(t *testing.T) {
	e := newTestEnv(t, nil)
	mount := filepath.Join(t.TempDir(), "certs")
	swap := func(version string, cert, key []byte) {
		dir := "..2026_" + version
		writeFile(t, filepath.Join(mount, dir, "tls.crt"), string(cert))
		writeFile(t, filepath.Join(mount, dir, "tls.key"), string(key))
		old, _ := os.Readlink(filepath.Join(mount, "..data"))
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink(dir, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"tls.crt", "tls.key"} {
			if _, err := os.Lstat(filepath.Join(mount, name)); os.IsNotExist(err) {
				if err := os.Symlink(filepath.Join("..data", name), filepath.Join(mount, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if old != "" {
			if err := os.RemoveAll(filepath.Join(mount, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	firstNotAfter := time.Now().Add(10 * time.Hour).Truncate(time.Second)
	cert, key := e.ca.issue(t, 10, firstNotAfter)
	swap("1", cert, key)
	e.opts.CertDir = mount
	e.start(nil)
	e.waitReady()
	if got := e.metric("sandbox_webhook_certificate_not_after_timestamp_seconds"); got != float64(firstNotAfter.Unix()) {
		t.Fatalf("not-after metric = %v, want %v", got, firstNotAfter.Unix())
	}

	var ok atomic.Int64
	var failures []string
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		keepAlive := i%2 == 0
		wg.Go(func() {
			client := e.newClient(!keepAlive)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := e.admit(client, reviewFor(t, fmt.Sprintf("c%d-%d", i, n), "sandboxes", sandboxPodJSON))
				if err == nil && (res.status != http.StatusOK || !res.review.Response.Allowed || len(res.review.Response.Patch) == 0) {
					err = fmt.Errorf("HTTP %d %s", res.status, res.body)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("keepAlive=%v: %v", keepAlive, err))
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		})
	}
	testkit.WaitFor(t, "load before the rotation", time.Minute, testkit.Holds(func() bool { return ok.Load() >= 100 }))

	secondNotAfter := time.Now().Add(20 * time.Hour).Truncate(time.Second)
	cert, key = e.ca.issue(t, 11, secondNotAfter)
	swap("2", cert, key)
	addr := e.webhookAddr()
	testkit.WaitFor(t, "the new certificate on new connections", time.Minute, testkit.Holds(func() bool {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: e.ca.pool})
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64() == 11
	}))
	after := ok.Load()
	testkit.WaitFor(t, "load after the rotation", time.Minute, testkit.Holds(func() bool { return ok.Load() >= after+100 }))
	close(stop)
	wg.Wait()

	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %s", len(failures), int(ok.Load())+len(failures), failures[0])
	}
	if got := e.metric("sandbox_webhook_certificate_not_after_timestamp_seconds"); got != float64(secondNotAfter.Unix()) {
		t.Errorf("not-after metric = %v, want %v", got, secondNotAfter.Unix())
	}
	if st := e.status(); !st.Certificate.NotAfter.Equal(secondNotAfter) {
		t.Errorf("/status notAfter = %v, want %v", st.Certificate.NotAfter, secondNotAfter)
	}
	t.Logf("%d requests, none failed", ok.Load())
}
