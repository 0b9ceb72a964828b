package server

import (
	"context"
	"crypto/tls"
	"log"
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
	// EvictBusy lets a connection beyond the total take the room of the
	// longest open connection of the source holding the most, busy or
	// not: only for ports whose requests are safe to fail and send again.
	EvictBusy bool
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

// minAgeToEvictUnrequested is how long a connection may stay open without
// sending one whole request head before a new connection may take its room,
// busy or not: the API server sends its head within milliseconds of
// connecting, so a connection that has sent none for this long is a client
// that holds room without asking anything of the server (the head's own
// deadline, readHeaderTimeout, closes it later still).
var minAgeToEvictUnrequested = 5 * time.Second

// The metrics and health ports' caps: a scraper or two and the kubelet's
// probes, a connection or two each. Their requests are GETs a scraper or
// the kubelet sends again, so a connection beyond the total may also take
// the room of a busy connection of the source holding the most
// (evictBusy): no set of sources can keep the kubelet or a scraper out.
var probeConnLimits = connLimits{Total: 64, PerSource: 16, EvictBusy: true}

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
// takes the room, in this order, of: a connection of its own source
// (beyond the per-source cap) or of any source (beyond the total) that has
// sent no whole request head in minAgeToEvictUnrequested; the longest idle
// keep-alive connection of its own source, or of the source holding the
// most when that source holds more than its own; on a port that allows it
// (EvictBusy), the longest open connection of that source. Closing an idle
// connection loses no request, the API server, which reuses its
// connections, holds fewer than a client hoarding them, and it sends its
// heads at once. Otherwise the new connection is closed at once.
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
		if !l.evictUnrequested(src) && !l.evictIdle(src) {
			return nil
		}
	} else if l.open >= l.limits.Total && !l.evictUnrequested("") {
		busiest, most := "", 0
		for s, conns := range l.bySource {
			if len(conns) > most {
				busiest, most = s, len(conns)
			}
		}
		if most <= mine+1 {
			return nil
		}
		if !l.evictIdle(busiest) && (!l.limits.EvictBusy || !l.evictOldest(busiest)) {
			return nil
		}
	}
	lc := &limitedConn{Conn: c, l: l, src: src, opened: time.Now()}
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
	return l.evict(oldest)
}

// evictUnrequested closes the oldest connection of src (of any source when
// src is "") that has been open for minAgeToEvictUnrequested without
// sending a whole request head, and reports whether there was one. l.mu is
// held.
func (l *limitListener) evictUnrequested(src string) bool {
	var oldest *limitedConn
	pick := func(conns map[*limitedConn]struct{}) {
		for c := range conns {
			if !c.requested && time.Since(c.opened) >= minAgeToEvictUnrequested && (oldest == nil || c.opened.Before(oldest.opened)) {
				oldest = c
			}
		}
	}
	if src != "" {
		pick(l.bySource[src])
	} else {
		for _, conns := range l.bySource {
			pick(conns)
		}
	}
	return l.evict(oldest)
}

// evictOldest closes the longest open connection of src, busy or not.
// l.mu is held.
func (l *limitListener) evictOldest(src string) bool {
	var oldest *limitedConn
	for c := range l.bySource[src] {
		if oldest == nil || c.opened.Before(oldest.opened) {
			oldest = c
		}
	}
	return l.evict(oldest)
}

// evict closes c, if any, and takes it out of the count. l.mu is held.
func (l *limitListener) evict(c *limitedConn) bool {
	if c == nil {
		return false
	}
	l.forget(c)
	_ = c.Conn.Close() // its server goroutine sees the read fail and ends
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

type connKey struct{}

// ConnContext keeps the connection in its requests' context, for
// Requested: to be set as the http.Server's ConnContext.
func (l *limitListener) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// Requested wraps the server's handler: it records that the connection of
// each request has sent a whole request head, so that its room is no
// longer taken for a new connection's unless it is idle.
func (l *limitListener) Requested(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			l.mu.Lock()
			lc.requested = true
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
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
	l      *limitListener
	src    string
	opened time.Time
	// idle, idleSince and requested (a whole request head arrived) are
	// guarded by l.mu.
	idle      bool
	idleSince time.Time
	requested bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return err
}

// httpServer is the http.Server of one of the server's ports, behind l: the
// webhook port and the probe ports share its limits on request heads and its
// accounting of connections (a connection that sends no whole head is
// evicted first), and idle is how long a keep-alive connection may idle.
func httpServer(l *limitListener, h http.Handler, errorLog *log.Logger, idle time.Duration) *http.Server {
	return &http.Server{
		Handler:           l.Requested(h),
		ConnState:         l.ConnState,
		ConnContext:       l.ConnContext,
		ErrorLog:          errorLog,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idle,
	}
}
