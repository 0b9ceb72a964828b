package server

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connLimits cap the connections a server port holds open at once: in
// total, and from any one source address, so that no client can make the
// server hold more memory in connections (tens of KiB each, more while a
// head arrives) than the caps allow, and one source cannot take the room of
// the others. A connection beyond a cap takes the room of an idle
// keep-alive connection of the source that holds the most (see
// limitListener.Accept), or is closed as soon as it is accepted, before its
// TLS handshake or its first byte is read.
type connLimits struct {
	// Total and PerSource are the caps; PerSource is at most Total.
	Total, PerSource int
}

// The webhook port's caps. The API server opens a connection per admission
// call in flight (HTTP/1.1) and keeps them for the next calls; it serves up
// to 600 requests at once by default (--max-requests-inflight and
// --max-mutating-requests-inflight together), so one source may hold as
// many connections as the port holds: a cap per source below that refuses
// the API server's own calls in a burst of pod creates, and each refused or
// closed connection fails a create.
const (
	defaultMaxConnections          = 1024
	defaultMaxConnectionsPerSource = defaultMaxConnections
)

// minIdleToEvict is how long a keep-alive connection must have been idle
// before a new one may take its room: a client reuses its idle connections
// at once in a burst, and one closed just as its next request is written
// fails that request (a POST is not retried).
const minIdleToEvict = time.Second

// The metrics and health ports' caps: a scraper or two and the kubelet's
// probes, a connection or two each.
var probeConnLimits = connLimits{Total: 64, PerSource: 16}

// limitListener is a net.Listener that holds at most limits.Total
// connections at once, and limits.PerSource from one source IP. Its
// http.Server must report connection states to ConnState, so that it knows
// which connections are idle. It counts the connections it closes in
// refused.
type limitListener struct {
	net.Listener
	limits  connLimits
	refused prometheus.Counter

	mu       sync.Mutex
	open     int
	bySource map[string]map[*limitedConn]struct{}
}

func newLimitListener(l net.Listener, limits connLimits, refused prometheus.Counter) *limitListener {
	return &limitListener{Listener: l, limits: limits, refused: refused, bySource: map[string]map[*limitedConn]struct{}{}}
}

// Accept returns the next connection within the caps. One beyond a cap
// takes the room of the longest idle keep-alive connection of its own
// source (beyond the per-source cap) or of the source holding the most
// (beyond the total), when that source holds more than its own: closing an
// idle connection loses no request, and the API server, which reuses its
// connections, holds fewer than a client hoarding them. Otherwise it is
// closed at once.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
		// Refused cheaply: no handshake, no buffer, no goroutine.
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // a reset: no TIME_WAIT kept for it
		}
		_ = c.Close()
		l.refused.Inc()
	}
}

// admit takes room for c, evicting an idle connection if need be, and
// returns c wrapped, or nil when there is no room.
func (l *limitListener) admit(c net.Conn) *limitedConn {
	src := sourceOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := len(l.bySource[src])
	if mine >= l.limits.PerSource {
		if !l.evictIdle(src) {
			return nil
		}
	} else if l.open >= l.limits.Total {
		busiest, most := "", 0
		for s, conns := range l.bySource {
			if len(conns) > most {
				busiest, most = s, len(conns)
			}
		}
		if most <= mine+1 || !l.evictIdle(busiest) {
			return nil
		}
	}
	lc := &limitedConn{Conn: c, l: l, src: src}
	if l.bySource[src] == nil {
		l.bySource[src] = map[*limitedConn]struct{}{}
	}
	l.bySource[src][lc] = struct{}{}
	l.open++
	return lc
}

// evictIdle closes the longest idle connection of src, if idle for
// minIdleToEvict at least, and takes it out of the count, and reports
// whether there was one. l.mu is held.
func (l *limitListener) evictIdle(src string) bool {
	var oldest *limitedConn
	for c := range l.bySource[src] {
		if c.idle && time.Since(c.idleSince) >= minIdleToEvict && (oldest == nil || c.idleSince.Before(oldest.idleSince)) {
			oldest = c
		}
	}
	if oldest == nil {
		return false
	}
	l.forget(oldest)
	_ = oldest.Conn.Close() // its server goroutine sees the read fail and ends
	return true
}

// forget takes c out of the count, once. l.mu is held.
func (l *limitListener) forget(c *limitedConn) {
	conns := l.bySource[c.src]
	if _, ok := conns[c]; !ok {
		return
	}
	delete(conns, c)
	if len(conns) == 0 {
		delete(l.bySource, c.src)
	}
	l.open--
}

// ConnState records whether a connection is idle: to be set as (or called
// from) the http.Server's ConnState.
func (l *limitListener) ConnState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lc.idle = st == http.StateIdle
	if lc.idle {
		lc.idleSince = time.Now()
	}
}

// sourceOf is the IP a connection comes from.
func sourceOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// limitedConn is a connection limitListener counts; closing it gives its
// room back.
type limitedConn struct {
	net.Conn
	l   *limitListener
	src string
	// idle and idleSince are guarded by l.mu.
	idle      bool
	idleSince time.Time
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return err
}
