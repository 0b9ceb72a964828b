package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// gatedLookup blocks admissions of pods named "blocked" until the gate
// opens, and counts every lookup: each is a request the handler took on.
type gatedLookup struct {
	next    func(context.Context, string) (mutate.Namespace, bool)
	gate    chan struct{}
	waiting chan struct{}
	handled atomic.Int64
}

func gate(s *server) *gatedLookup {
	g := &gatedLookup{next: s.lookup, gate: make(chan struct{}), waiting: make(chan struct{}, 100)}
	s.lookup = func(ctx context.Context, name string) (mutate.Namespace, bool) {
		g.handled.Add(1)
		return g.next(ctx, name)
	}
	return g
}

const blockedPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"blocked","namespace":"blocking","labels":{"app":"sandbox"}},` +
	`"spec":{"containers":[{"name":"main","image":"python:3.12-slim"}]}}`

// block makes lookups of namespace "blocking" wait for the gate.
func (g *gatedLookup) install(s *server) {
	counted := s.lookup
	s.lookup = func(ctx context.Context, name string) (mutate.Namespace, bool) {
		if name == "blocking" {
			g.waiting <- struct{}{}
			<-g.gate
			return mutate.Namespace{Name: name}, true
		}
		return counted(ctx, name)
	}
}

// TestGracefulShutdown stops the server while reviews are in flight and a
// client keeps sending on keep-alive connections: every request the server
// took on is answered, in-flight answers close their connections, the
// listener is closed before Run returns, and Run waits for the stragglers.
func TestGracefulShutdown(t *testing.T) {
	e := newTestEnv(t, nil)
	var g *gatedLookup
	e.start(func(s *server) { g = gate(s); g.install(s) })
	e.waitReady()

	const blocked = 4
	type answer struct {
		res admitResult
		err error
	}
	answers := make(chan answer, blocked)
	for i := range blocked {
		go func() {
			res, err := e.admit(e.newClient(false), reviewFor(t, fmt.Sprint("blocked-", i), "blocking", blockedPod))
			answers <- answer{res, err}
		}()
	}
	for range blocked {
		<-g.waiting
	}

	// Hammer with keep-alive until the server stops taking requests.
	var shuttingDown atomic.Bool
	var ok, refused atomic.Int64
	hammerErrs := make(chan error, 8)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			client := e.newClient(false)
			for n := 0; ; n++ {
				sd := shuttingDown.Load()
				res, err := e.admit(client, reviewFor(t, fmt.Sprintf("h%d-%d", i, n), "sandboxes", sandboxPodJSON))
				if err != nil {
					if sd || shuttingDown.Load() {
						refused.Add(1)
						return
					}
					hammerErrs <- fmt.Errorf("before shutdown: %w", err)
					return
				}
				if res.status != http.StatusOK || !res.review.Response.Allowed || len(res.review.Response.Patch) == 0 {
					hammerErrs <- fmt.Errorf("a failed answer: HTTP %d %s", res.status, res.body)
					return
				}
				ok.Add(1)
			}
		})
	}
	testkit.WaitFor(t, "some load", time.Minute, testkit.Holds(func() bool { return ok.Load() >= 50 }))

	shuttingDown.Store(true)
	e.cancel()
	testkit.WaitFor(t, "the listener to close", time.Minute, testkit.Holds(e.listenerClosed))
	select {
	case err := <-e.done:
		t.Fatalf("Run returned (%v) while %d reviews were in flight", err, blocked)
	default:
	}
	wg.Wait()
	close(hammerErrs)
	for err := range hammerErrs {
		t.Error(err)
	}

	close(g.gate)
	for range blocked {
		a := <-answers
		if a.err != nil {
			t.Errorf("an in-flight review failed: %v", a.err)
			continue
		}
		if a.res.status != http.StatusOK || !a.res.review.Response.Allowed || len(a.res.review.Response.Patch) == 0 {
			t.Errorf("an in-flight review: HTTP %d %s", a.res.status, a.res.body)
		}
		if !a.res.closed {
			t.Error("an answer during shutdown kept its connection open")
		}
	}
	if err := <-e.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	e.cancel = nil
	if handled := g.handled.Load(); handled != ok.Load() {
		t.Errorf("the server took on %d hammer requests but clients got %d answers", handled, ok.Load())
	}
	t.Logf("hammer: %d answered, %d clients stopped by the closed listener", ok.Load(), refused.Load())
}

// TestShutdownDelay checks the time between SIGTERM and closing the
// listener: not ready, still answering, and every answer closes its
// keep-alive connection so the client reconnects (through the Service,
// to a pod that is not going away).
func TestShutdownDelay(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.ShutdownDelay = time.Hour })
	release := make(chan time.Time)
	e.start(func(s *server) {
		s.after = func(d time.Duration) <-chan time.Time {
			if d != time.Hour {
				t.Errorf("delay %v", d)
			}
			return release
		}
	})
	e.waitReady()
	client := e.newClient(false)
	if m := e.marker(client); m != "a" {
		t.Fatal(m)
	}

	e.cancel()
	testkit.WaitFor(t, "not ready", time.Minute, testkit.Holds(func() bool {
		code, body := e.get(e.healthURL + "/readyz")
		return code != http.StatusOK && strings.Contains(body, "[-]shutdown failed")
	}))
	for i := range 3 {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.webhookURL, strings.NewReader(string(reviewFor(t, "d", "sandboxes", sandboxPodJSON))))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d during the delay: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !resp.Close {
			t.Errorf("request %d during the delay: HTTP %d, Connection: close = %v", i, resp.StatusCode, resp.Close)
		}
		if i > 0 && reused {
			t.Errorf("request %d reused a connection the server asked to close", i)
		}
	}
	select {
	case err := <-e.done:
		t.Fatalf("Run returned during the delay: %v", err)
	default:
	}
	close(release)
	if err := <-e.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	e.cancel = nil
	if _, err := net.Dial("tcp", e.webhookAddr()); err == nil {
		t.Error("the webhook port still accepts connections after Run returned")
	}
}

// TestIdleDrain: after the listener closes, a keep-alive connection the
// client holds idle stays open for --idle-drain, so a request the client
// sends on it is answered (with "Connection: close") rather than meeting a
// connection the server closed: the API server does not retry an admission
// POST that meets one (EOF, broken pipe; make cluster-e2e saw it during a
// rollout). Run returns once the client has closed its connections.
func TestIdleDrain(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.IdleDrain = time.Minute })
	e.start(nil)
	e.waitReady()
	client := e.newClient(false)
	if m := e.marker(client); m != "a" {
		t.Fatal(m)
	}
	// The connection now sits idle in the client's pool.
	e.cancel()
	testkit.WaitFor(t, "the listener to close", time.Minute, testkit.Holds(e.listenerClosed))
	var reused bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.webhookURL, strings.NewReader(string(reviewFor(t, "idle", "sandboxes", sandboxPodJSON))))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a request on the idle keep-alive connection after the listener closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close || !reused {
		t.Errorf("HTTP %d, Connection: close = %v, on the idle connection = %v; want 200, true, true", resp.StatusCode, resp.Close, reused)
	}
	select {
	case err := <-e.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once the client closed its last connection")
	}
	e.cancel = nil
}

// listenerClosed reports whether the webhook port refuses a TLS handshake.
func (e *testEnv) listenerClosed() bool {
	c, err := tls.Dial("tcp", e.webhookAddr(), &tls.Config{RootCAs: e.ca.pool})
	if err == nil {
		c.Close()
	}
	return err != nil
}
