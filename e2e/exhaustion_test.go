package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// chartMemoryLimit is the chart's resources.limits.memory (256Mi): above it
// the kernel kills the webhook, and with failurePolicy Fail sandbox pods can
// no longer be created.
const chartMemoryLimit = 256 << 20

// TestMemoryExhaustionHeld holds the attack an attacker-minded review used
// against serve, from loopback: 80 connections each announcing a 3 MB body
// and stalling just before its end, and 200 connections sending about 1 MB
// of headers, each reconnecting when the server drops it. While the attack is
// held, sandbox pods created through the real API server must be admitted and
// mutated, and the process's peak RSS (VmHWM) must stay below the chart's
// memory limit. The loops are bounded by the test's own deadline and stop
// by themselves; nothing is timed.
func TestMemoryExhaustionHeld(t *testing.T) {
	const ns = "exhaustion"
	in := newInstance(t, "exhaustion", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	pid := in.webhook.PID()
	before := procMemory(t, pid)
	t.Logf("before the attack: VmRSS %d MiB, VmHWM %d MiB", before.rss>>20, before.hwm>>20)

	ctx, stop := context.WithTimeout(t.Context(), 2*time.Minute)
	defer stop()
	var wg, started sync.WaitGroup
	var stalled, headers atomic.Int64 // attempts that got to their stall point
	attack := func(n int, run func(ctx context.Context, reached func()), counter *atomic.Int64) {
		for range n {
			started.Add(1)
			wg.Go(func() {
				var once sync.Once
				first := func() { once.Do(started.Done) }
				defer first()
				reached := func() {
					counter.Add(1)
					first()
				}
				for ctx.Err() == nil {
					run(ctx, reached)
					first() // refused before the stall point counts too
					// A short pause between reconnects keeps the loop
					// from spinning on a shared machine.
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
			})
		}
	}
	addr := in.webhook.Address()
	attack(80, func(ctx context.Context, reached func()) { stallBody(ctx, addr, 3<<20, reached) }, &stalled)
	attack(200, func(ctx context.Context, reached func()) { hugeHeaders(ctx, addr, 1<<20, reached) }, &headers)
	defer func() {
		stop()
		wg.Wait()
	}()

	// Once every attacking connection has sent what it stalls on (or was
	// refused before), admit sandbox pods through the API server while the
	// attack is held.
	started.Wait()
	for i := range 20 {
		pod := createPod(t, testkit.SandboxPod(ns, fmt.Sprintf("under-attack-%d", i), sleeping))
		if p := seedProblems(pod, corev1.StorageMediumMemory); len(p) > 0 {
			t.Errorf("pod %d admitted under attack:%s", i, joinProblems(p))
		}
		if !in.webhook.Running() {
			t.Fatal("the webhook process died under the attack")
		}
	}
	if stalled.Load() == 0 {
		t.Errorf("no attacking connection got to send its stalled body")
	}
	// The limits were what held: requests were refused for want of room.
	// A body waits up to the budget's 2 s for room before it is refused,
	// and on an idle machine the pods above are admitted sooner, so the
	// refusals are waited for (while the attack goes on).
	refused := false
	for deadline := time.Now().Add(30 * time.Second); !refused && time.Now().Before(deadline); {
		if refused = in.metric(t, "sandbox_webhook_busy_refusals_total") > 0; !refused {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !refused {
		t.Errorf("no request was refused for want of room in the request budget within 30 s of the attack")
	}
	after := procMemory(t, pid)
	t.Logf("under the attack (%d stalled bodies and %d header floods sent in all): VmRSS %d MiB, peak VmHWM %d MiB",
		stalled.Load(), headers.Load(), after.rss>>20, after.hwm>>20)
	if after.hwm >= chartMemoryLimit {
		t.Errorf("peak RSS %d MiB reached the chart's memory limit of %d MiB", after.hwm>>20, chartMemoryLimit>>20)
	}
}

// stallBody announces a body of n bytes, sends all but its last KiB, calls
// reached and holds the connection until the server drops it or ctx ends.
func stallBody(ctx context.Context, addr string, n int, reached func()) {
	c, err := attackConn(ctx, addr)
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mutate-v1-pod HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, n)
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = ' '
	}
	sent := 0
	for sent < n-1024 {
		m := min(len(chunk), n-1024-sent)
		if _, err := c.Write(chunk[:m]); err != nil {
			return // refused
		}
		sent += m
	}
	reached()
	hold(ctx, c)
}

// hugeHeaders sends a request head of about n bytes of headers, calls
// reached and holds the connection until the server drops it or ctx ends.
func hugeHeaders(ctx context.Context, addr string, n int, reached func()) {
	c, err := attackConn(ctx, addr)
	if err != nil {
		return
	}
	defer c.Close()
	w := bufio.NewWriterSize(c, 64<<10)
	fmt.Fprintf(w, "POST /mutate-v1-pod HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", addr)
	value := strings.Repeat("x", 1000)
	for i := 0; i < n/1024; i++ {
		if _, err := fmt.Fprintf(w, "X-Pad-%d: %s\r\n", i, value); err != nil {
			return // refused
		}
	}
	if err := w.Flush(); err != nil {
		return // refused
	}
	reached()
	hold(ctx, c)
}

func attackConn(ctx context.Context, addr string) (net.Conn, error) {
	d := tls.Dialer{NetDialer: attackDialer(0), Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the attacker does not check the server
	return d.DialContext(ctx, "tcp", addr)
}

// hold reads (and drops) whatever the server answers until it closes the
// connection or ctx ends.
func hold(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_, _ = io.Copy(io.Discard, c)
}

type procMem struct{ rss, hwm int64 }

// procMemory reads the resident set and its peak from /proc/PID/status.
func procMemory(t *testing.T, pid int) procMem {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var m procMem
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		}
	}
	if m.rss == 0 || m.hwm == 0 {
		t.Fatalf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return m
}
