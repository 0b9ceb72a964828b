package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

func TestRequestBudget(t *testing.T) {
	b := newRequestBudget(1<<20, 3) // large bodies may hold 768 KiB
	ctx := t.Context()
	none := func() context.Context {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}

	large1, err := b.acquire(ctx, 512<<10)
	if err != nil {
		t.Fatal(err)
	}
	// A second large body would pass three quarters of the budget...
	if _, err := b.acquire(none(), 512<<10); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second 512 KiB body got room: %v", err)
	}
	// ...while small ones still fit, up to the whole of it.
	small, err := b.acquire(ctx, smallBodyBytes)
	if err != nil {
		t.Fatalf("a small body found no room beside a large one: %v", err)
	}
	if bytes, n := b.held(); bytes != 512<<10+smallBodyBytes || n != 2 {
		t.Errorf("held %d bytes in %d requests", bytes, n)
	}
	// The count is bounded too.
	third, err := b.acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(none(), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a fourth request got room with --max-in-flight 3: %v", err)
	}

	// A waiting request gets the room as soon as it is given back, once.
	got := make(chan error, 1)
	go func() {
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		release, err := b.acquire(wait, 512<<10)
		if err == nil {
			release()
		}
		got <- err
	}()
	large1()
	large1() // a second release gives nothing back
	if err := <-got; err != nil {
		t.Fatalf("the waiting request: %v", err)
	}
	small()
	third()
	if bytes, n := b.held(); bytes != 0 || n != 0 {
		t.Errorf("after every release: held %d bytes in %d requests", bytes, n)
	}
}

func TestBodyReadTime(t *testing.T) {
	for _, tc := range []struct {
		n       int64
		timeout time.Duration
		want    time.Duration
	}{
		{0, 10 * time.Second, time.Second},
		{3 << 20, 10 * time.Second, 4 * time.Second},
		{3 << 20, 2 * time.Second, 2 * time.Second},
		{6 << 20, 0, 7 * time.Second},
	} {
		if got := bodyReadTime(tc.n, tc.timeout); got != tc.want {
			t.Errorf("bodyReadTime(%d, %s) = %s, want %s", tc.n, tc.timeout, got, tc.want)
		}
	}
}

// TestStalledBodiesCannotCrowdOut holds a connection that announces a body as
// large as the budget lets large bodies hold and sends none of it: another
// large body finds no room and gets a 503, a review of the API server's size
// is still answered, and the stalled connection is dropped once its body is
// overdue.
func TestStalledBodiesCannotCrowdOut(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.MaxRequestBytes = 3 << 20
		o.MaxBufferedBytes = 4 << 20 // large bodies share 3 MiB
	})
	e.start(nil)
	e.waitReady()

	stalled := rawConn(t, e)
	fmt.Fprintf(stalled, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", admission.Path, 3<<20)
	testkit.WaitFor(t, "the stalled body to hold the budget", time.Minute, testkit.Holds(func() bool {
		n, _ := e.srv.budget.held()
		return n == 3<<20
	}))

	big := append(reviewFor(t, "big", "sandboxes", sandboxPodJSON), bytes.Repeat([]byte(" "), 1<<20)...)
	res, err := e.admit(e.newClient(true), big)
	if err != nil || res.status != http.StatusServiceUnavailable || !res.closed ||
		!strings.Contains(res.body, "sandbox-webhook is busy") || !strings.Contains(res.body, "--max-buffered-bytes") {
		t.Errorf("a large body beside the stalled one: %v HTTP %d closed=%v %q", err, res.status, res.closed, res.body)
	}
	if m := e.marker(e.client); m != "a" {
		t.Errorf("MARKER = %q beside the stalled body", m)
	}
	if got := e.metric("sandbox_webhook_busy_refusals_total"); got != 1 {
		t.Errorf("busy refusals counted: %v, want 1", got)
	}

	// The stalled body is overdue after 1s + 3 MiB at 1 MiB/s: the server
	// answers 400 and closes the connection, giving the room back.
	_ = stalled.SetReadDeadline(time.Now().Add(time.Minute))
	answer, err := io.ReadAll(stalled)
	if err != nil || !strings.HasPrefix(string(answer), "HTTP/1.1 400") {
		t.Errorf("the stalled connection: %v %q", err, answer)
	}
	testkit.WaitFor(t, "the budget to be given back", time.Minute, testkit.Holds(func() bool {
		n, _ := e.srv.budget.held()
		return n == 0
	}))
}

// TestRequestHeadLimit: a request head of 1 MiB is refused with 431, while
// controller-runtime's server would take it whole.
func TestRequestHeadLimit(t *testing.T) {
	e := newTestEnv(t, nil)
	e.start(nil)
	e.waitReady()
	req, err := http.NewRequest(http.MethodPost, e.webhookURL, bytes.NewReader(reviewFor(t, "h", "sandboxes", sandboxPodJSON)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := range 1024 {
		req.Header.Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("x", 1000))
	}
	resp, err := e.newClient(true).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 1 MiB request head: HTTP %d, want 431", resp.StatusCode)
	}
	if m := e.marker(e.client); m != "a" {
		t.Errorf("MARKER = %q after the refused head", m)
	}
}

func rawConn(t *testing.T, e *testEnv) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", e.webhookAddr(), &tls.Config{RootCAs: e.ca.pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// held returns the bytes and requests held now (for the tests).
func (b *requestBudget) held() (int64, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes, b.requests
}

// TestPodPartsCountAgainstTheBudget: what processing a pod takes beyond its
// body (admission.Price) is taken from the request budget before the pod is
// decoded. A pod whose processing could never fit is refused in its review
// (code 413) with what it holds; one that does not fit now waits, then gets a 503; the budget is
// given back either way, and a plain review is answered meanwhile.
func TestPodPartsCountAgainstTheBudget(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.MaxRequestBytes = 3 << 20
		o.MaxBufferedBytes = 4 << 20 // large reservations share 3 MiB
	})
	e.start(nil)
	e.waitReady()
	tiny := func(containers int) string {
		var b strings.Builder
		b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"sandboxes","labels":{"app":"sandbox"}},"spec":{"containers":[`)
		for i := range containers {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"c%d","image":"i"}`, i)
		}
		b.WriteString(`]}}`)
		return b.String()
	}

	// 1,000 containers take about 18 MiB to process: never within 3 MiB.
	res, err := e.admit(e.newClient(true), reviewFor(t, "many", "sandboxes", tiny(1000)))
	// A property of the pod: refused in the review, which the API server
	// applies whatever the failurePolicy, not with an HTTP error, which
	// fails open under webhook.guard (the chart's guard).
	if err != nil || res.status != http.StatusOK || !strings.Contains(res.body, `"uid":"uid-many","allowed":false`) ||
		!strings.Contains(res.body, `"code":413`) ||
		!strings.Contains(res.body, "would take about 18 MiB") || !strings.Contains(res.body, "--max-buffered-bytes") {
		t.Errorf("1,000 containers within a 4 MiB budget: %v HTTP %d %.300q", err, res.status, res.body)
	}

	// 100 containers take about 1.9 MiB: they fit, but not beside a stalled
	// body of 2.5 MiB, which is dropped only after the 2 s a request waits.
	stalled := rawConn(t, e)
	fmt.Fprintf(stalled, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", admission.Path, 5<<19)
	testkit.WaitFor(t, "the stalled body to hold the budget", time.Minute, testkit.Holds(func() bool {
		n, _ := e.srv.budget.held()
		return n == 5<<19
	}))
	res, err = e.admit(e.newClient(true), reviewFor(t, "some", "sandboxes", tiny(100)))
	if err != nil || res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "processing a review of 3117 bytes") {
		t.Errorf("100 containers beside a stalled body: %v HTTP %d %.300q", err, res.status, res.body)
	}
	if m := e.marker(e.client); m != "a" {
		t.Errorf("MARKER = %q beside the stalled body", m)
	}
	stalled.Close()
	testkit.WaitFor(t, "the budget to be given back", time.Minute, testkit.Holds(func() bool {
		n, _ := e.srv.budget.held()
		return n == 0
	}))
	res, err = e.admit(e.newClient(true), reviewFor(t, "some-again", "sandboxes", tiny(100)))
	if err != nil || res.status != http.StatusOK || !strings.Contains(res.body, `"allowed":true`) {
		t.Errorf("100 containers alone: %v HTTP %d %.200q", err, res.status, res.body)
	}
}
