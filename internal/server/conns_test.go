package server

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestLimitListener: a listener accepts at most its caps, in total and per
// source IP, closes what comes beyond them at once, counts it, and gives a
// connection's room back when it is closed.
func TestLimitListener(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	l := newLimitListener(tcp, connLimits{Total: 3, PerSource: 2}, refused)
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	// dial connects from the source IP and returns the server's side of
	// the connection, or nil when the server closed it at once.
	dial := func(src string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", tcp.Addr().String())
		if isReset(err) {
			return nil // refused before the dial returned
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		select {
		case s := <-accepted:
			return s
		case <-time.After(time.Second):
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("a refused connection from %s was written to", src)
			}
			return nil
		}
	}
	var kept []net.Conn
	for i, want := range []struct {
		src  string
		kept bool
	}{
		{"127.0.0.2", true}, {"127.0.0.2", true},
		{"127.0.0.2", false}, // beyond the per-source cap
		{"127.0.0.3", true},
		{"127.0.0.4", false}, // beyond the total
	} {
		s := dial(want.src)
		if (s != nil) != want.kept {
			t.Fatalf("connection %d from %s: kept %v, want %v", i, want.src, s != nil, want.kept)
		}
		if s != nil {
			kept = append(kept, s)
		}
	}
	if got := testutil.ToFloat64(refused); got != 2 {
		t.Errorf("refused %v connections, want 2", got)
	}
	// Closed by the server, a connection gives its room back, once.
	kept[0].Close()
	kept[0].Close()
	if dial("127.0.0.4") == nil {
		t.Errorf("a connection was refused after one of the three closed")
	}
	if dial("127.0.0.5") != nil {
		t.Errorf("a fourth connection was kept")
	}
}

// TestProbePortsLimits: the metrics and health ports take request heads of
// the webhook port's size, not net/http's 1 MiB, and hold at most
// probeConnLimits connections from one source.
func TestProbePortsLimits(t *testing.T) {
	e := newTestEnv(t, nil)
	e.start(nil)
	e.waitReady()
	// The test's connections come from an address of their own: the
	// environment's client keeps connections to the ports open.
	from := func(ip string) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	}
	for i, addr := range []string{e.opts.MetricsBindAddress, e.opts.HealthProbeBindAddress} {
		t.Run(addr, func(t *testing.T) {
			c, err := from("127.0.0.5").Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A head twice the limit is answered 431 and closed.
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", strings.Repeat("x", 2*maxHeaderBytes))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("a %d KiB head: HTTP %d, want 431", 2*maxHeaderBytes>>10, resp.StatusCode)
			}
			c.Close()

			// A source holds at most the cap. Its connections each send
			// half a head, so none is idle.
			d := from(fmt.Sprintf("127.0.0.%d", 6+i))
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range probeConnLimits.PerSource {
				c, err := d.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
				held = append(held, c)
			}
			// One more, accepted after them, is closed unanswered.
			if b, err := oneRequest(d, addr); len(b) > 0 {
				t.Errorf("a connection beyond the cap: read %q, %v; want it closed unanswered", b, err)
			}
			// Once one of them is answered and idle, a new one takes
			// its room, and the idle one is closed.
			fmt.Fprintf(held[0], "\r\n")
			r := bufio.NewReader(held[0])
			resp, err = http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// The server marks it idle just after it answers: until then a
			// new connection is still refused.
			var b []byte
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				if b, err = oneRequest(d, addr); len(b) > 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 ") {
				t.Errorf("a connection beside an idle one at the cap: read %q, %v; want it answered", b, err)
			}
			_ = held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := r.Read(make([]byte, 1)); n > 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the idle connection whose room was taken: read %d bytes, %v; want it closed", n, err)
			}
		})
	}
	if got := e.metric("sandbox_webhook_connections_refused_total", "server=metrics"); got < 1 {
		t.Errorf("connections refused on the metrics port: %v", got)
	}
}

// oneRequest sends GET /healthz on a new connection that asks to be closed
// and returns what it reads until the server closes it.
func oneRequest(d *net.Dialer, addr string) ([]byte, error) {
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	return io.ReadAll(c)
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// TestAPIServerBurstLosesNothing: an API server sends as many admission
// calls at once as it serves mutating requests, each on a keep-alive
// connection of its own (HTTP/1.1), and reuses them for the next burst; a
// call on a connection the server closes under it fails, and so does the
// pod's create. Under the webhook port's default caps, bursts of 600 calls
// from one source, back to back, all get their answer.
func TestAPIServerBurstLosesNothing(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(tcp, connLimits{Total: defaultMaxConnections, PerSource: defaultMaxConnectionsPerSource},
		prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))
	srv := &http.Server{
		// Each call is answered after all of its burst are in flight,
		// each on its own connection.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			time.Sleep(time.Second)
			_, _ = io.WriteString(w, "{}")
		}),
		ConnState: l.ConnState,
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxIdleConns: 1000}, Timeout: 20 * time.Second}
	const burst = 600
	for round := range 3 {
		errs := make(chan error, burst)
		for range burst {
			go func() {
				resp, err := client.Post("http://"+tcp.Addr().String()+"/mutate-v1-pod", "application/json", strings.NewReader(`{}`))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errs <- err
			}()
		}
		failed := 0
		var first error
		for range burst {
			if err := <-errs; err != nil {
				failed++
				first = cmp.Or(first, err)
			}
		}
		if failed > 0 {
			t.Fatalf("burst %d: %d of %d calls failed, the first: %v", round, failed, burst, first)
		}
	}
}

// TestUnrequestedAndBusyEviction: beyond the total, a new connection takes
// the room of one that has sent no whole request head for
// minAgeToEvictUnrequested, of any source, before anything else; a busy
// connection that sent its request keeps its room on the webhook port,
// and gives it up on a port that allows it (EvictBusy), to a source holding
// fewer.
func TestUnrequestedAndBusyEviction(t *testing.T) {
	defer func(d time.Duration) { minAgeToEvictUnrequested = d }(minAgeToEvictUnrequested)
	minAgeToEvictUnrequested = 200 * time.Millisecond
	for _, evictBusy := range []bool{false, true} {
		t.Run(fmt.Sprintf("evictBusy=%v", evictBusy), func(t *testing.T) {
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			l := newLimitListener(tcp, connLimits{Total: 4, PerSource: 4, EvictBusy: evictBusy},
				prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))
			release := make(chan struct{})
			srv := &http.Server{
				Handler: l.Requested(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					<-release // busy until the test ends
				})),
				ConnState:   l.ConnState,
				ConnContext: l.ConnContext,
			}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { close(release); _ = srv.Close() })
			tryDial := func(src string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", tcp.Addr().String())
				if err == nil {
					t.Cleanup(func() { c.Close() })
				}
				return c, err
			}
			dial := func(src string) net.Conn {
				t.Helper()
				c, err := tryDial(src)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			// closed reports whether the server closed c within a second.
			closed := func(c net.Conn) bool {
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				_, err := c.Read(make([]byte, 1))
				return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
			}
			// Source .2 holds three busy connections that sent a request,
			// source .3 one that sends half a head and stalls.
			var busy []net.Conn
			for range 3 {
				c := dial("127.0.0.2")
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				busy = append(busy, c)
			}
			stalled := dial("127.0.0.3")
			fmt.Fprintf(stalled, "GET / HTTP/1.1\r\nHost: x\r\n")
			testkit.WaitFor(t, "the four connections to be counted, three requested", time.Minute, testkit.Holds(func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				n := 0
				for _, conns := range l.bySource {
					for c := range conns {
						if c.requested {
							n++
						}
					}
				}
				return l.open == 4 && n == 3
			}))
			time.Sleep(minAgeToEvictUnrequested)

			// A new source takes the stalled connection's room, and sends
			// its request.
			first := dial("127.0.0.4")
			fmt.Fprintf(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if !closed(stalled) {
				t.Fatal("the connection that sent no whole head in time kept its room")
			}
			if closed(first) {
				t.Fatal("the new connection was refused beside a stalled one")
			}
			// Another new source: only busy connections are left.
			// A connection the server closes at once may be reset before
			// the dial returns: refused either way.
			second, err := tryDial("127.0.0.5")
			if got := err != nil || closed(second); got == evictBusy {
				t.Errorf("beyond the total with only busy connections: new connection closed %v, want %v", got, !evictBusy)
			}
			evicted := 0
			for _, c := range busy {
				if closed(c) {
					evicted++
				}
			}
			if want := map[bool]int{false: 0, true: 1}[evictBusy]; evicted != want {
				t.Errorf("%d busy connections closed, want %d", evicted, want)
			}
		})
	}
}
