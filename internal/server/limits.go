package server

import (
	"context"
	"sync"
	"time"
)

// smallBodyBytes is the size up to which a request body may use the whole
// buffered-bytes budget; larger bodies share what is left of it after a
// quarter kept for small ones. A pod as the API server sends it is a few KiB:
// however many large bodies a client holds, those keep room.
const smallBodyBytes = 64 << 10

// smallRequestBytes is the size up to which a request's body and the
// processing counted for it together may use the whole budget. A pod as
// the API server sends it, with its defaults and token volume, is counted
// at 0.4 to 1.2 MiB (admission.Price; the e2e corpus); a pod that costs more
// shares what is left after the quarter kept for those. Processing cannot
// be stalled by its client, so many small ones hold the budget only while
// they are answered.
const smallRequestBytes = 2 << 20

// budgetWait is how long a request waits for room in the budget before it is
// answered 503.
const budgetWait = 2 * time.Second

// minBodyRate and bodyGrace size the time a body may take to arrive: the API
// server writes it right after the head, so a body that is not there within
// bodyGrace plus its size at 1 MiB/s is a client holding memory, and is
// dropped (--read-timeout still bounds it).
const (
	minBodyRate = 1 << 20 // bytes per second
	bodyGrace   = time.Second
)

// bodyReadTime is how long a body of n bytes may take to arrive.
func bodyReadTime(n int64, readTimeout time.Duration) time.Duration {
	d := bodyGrace + time.Duration(n)*time.Second/minBodyRate
	if readTimeout > 0 && readTimeout < d {
		return readTimeout
	}
	return d
}

// requestBudget bounds the request bodies the server holds at once: how many
// (--max-in-flight) and their bytes (--max-buffered-bytes), counted from the
// announced Content-Length before a byte is read, so that a client announcing
// large bodies and stalling cannot make the server allocate more. Once a body
// is read, what processing it will take beyond its bytes (admission.Price) is
// taken from the same bytes before it is decoded.
type requestBudget struct {
	maxBytes    int64
	maxRequests int

	mu       sync.Mutex
	bytes    int64
	requests int
	freed    chan struct{} // closed and replaced at every release
}

func newRequestBudget(maxBytes int64, maxRequests int) *requestBudget {
	return &requestBudget{maxBytes: maxBytes, maxRequests: maxRequests, freed: make(chan struct{})}
}

// largeShare is the part of the budget bodies above smallBodyBytes may use.
func largeShare(maxBytes int64) int64 { return maxBytes - maxBytes/4 }

// limitFor is the part of the budget a reservation of n bytes may use.
func (b *requestBudget) limitFor(n int64) int64 {
	if n > smallBodyBytes {
		return largeShare(b.maxBytes)
	}
	return b.maxBytes
}

// moreLimit is the part of the budget a request holding held bytes may use
// when it takes n more for processing its body.
func (b *requestBudget) moreLimit(held, n int64) int64 {
	if held > smallBodyBytes || held+n > smallRequestBytes {
		return largeShare(b.maxBytes)
	}
	return b.maxBytes
}

// fitsMore reports whether acquireMore(held, n) can ever be granted.
func (b *requestBudget) fitsMore(held, n int64) bool { return held+n <= b.moreLimit(held, n) }

// acquire waits until one more request of n bytes fits, or ctx ends. The
// returned release gives the room back; calling it more than once is safe.
func (b *requestBudget) acquire(ctx context.Context, n int64) (release func(), err error) {
	return b.reserve(ctx, n, b.limitFor(n), 1)
}

// acquireMore waits until n more bytes fit for a request that holds held
// already: what processing its body will take beyond the body (see
// moreLimit).
func (b *requestBudget) acquireMore(ctx context.Context, held, n int64) (release func(), err error) {
	return b.reserve(ctx, n, b.moreLimit(held, n), 0)
}

func (b *requestBudget) reserve(ctx context.Context, n, limit int64, requests int) (release func(), err error) {
	for {
		b.mu.Lock()
		if b.requests+requests <= b.maxRequests && b.bytes+n <= limit {
			b.bytes += n
			b.requests += requests
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.release(n, requests) }) }, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *requestBudget) release(n int64, requests int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes -= n
	b.requests -= requests
	close(b.freed)
	b.freed = make(chan struct{})
}
