package dryrun

import (
	"errors"
	"io"
	"slices"

	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
)

// Reading an object (go-yaml's parse) and writing it (go-yaml's or
// encoding/json's encoder, or the diff) are half of dry-run's work: each
// runs on a goroutine of its own, a few objects ahead of and behind the
// object being mutated, in order, so that on two cores a fleet's List takes
// about half the time. Memory stays flat: at most aheadObjects wait on
// either side.
const aheadObjects = 16

// readAhead runs read, which reads the input into the visitor it is given,
// on a goroutine of its own, and hands what it reads to v in order on the
// caller's. An error of v is returned at once and stops the reading.
func readAhead(read func(input.Visitor) error, v input.Visitor) error {
	calls, stop := make(chan func() error, aheadObjects), make(chan struct{})
	var readErr error
	go func() {
		defer close(calls)
		readErr = read(queue{calls, stop, v})
	}()
	for call := range calls {
		if err := call(); err != nil {
			close(stop) // the reader stops at its next object
			return err
		}
	}
	return readErr
}

var errStopped = errors.New("stopped")

// queue is the visitor readAhead's reader reads into: each call is queued
// for v.
type queue struct {
	calls chan<- func() error
	stop  <-chan struct{}
	v     input.Visitor
}

func (q queue) call(f func() error) error {
	select {
	case q.calls <- f:
		return nil
	case <-q.stop:
		return errStopped
	}
}

func (q queue) Object(pos input.Position, obj input.Object) error {
	return q.call(func() error { return q.v.Object(pos, obj) })
}

func (q queue) ListStart(pos input.Position, head map[string]any) error {
	return q.call(func() error { return q.v.ListStart(pos, head) })
}

func (q queue) ListItem(pos input.Position, item input.Object) error {
	return q.call(func() error { return q.v.ListItem(pos, item) })
}

func (q queue) ListEnd(pos input.Position, tail map[string]any) error {
	return q.call(func() error { return q.v.ListEnd(pos, tail) })
}

// renderer makes and writes the -o output on a goroutine of its own, in
// the order it is given. Its writes cannot fail: an error shows at the next
// sync.
type renderer struct {
	jobs chan renderJob
	err  error // the first; read after sync
}

type renderJob struct {
	render func() ([]byte, error)
	done   chan struct{} // closed once what came before is written
}

func newRenderer(w io.Writer) *renderer {
	r := &renderer{jobs: make(chan renderJob, aheadObjects)}
	go func() {
		for j := range r.jobs {
			if j.render != nil && r.err == nil {
				var b []byte
				if b, r.err = j.render(); r.err == nil {
					_, r.err = w.Write(b)
				}
			}
			if j.done != nil {
				close(j.done)
			}
		}
	}()
	return r
}

// render has what f makes written.
func (r *renderer) render(f func() ([]byte, error)) { r.jobs <- renderJob{render: f} }

func (r *renderer) Write(b []byte) (int, error) {
	c := slices.Clone(b)
	r.render(func() ([]byte, error) { return c, nil })
	return len(b), nil
}

func (r *renderer) WriteString(s string) (int, error) { return r.Write([]byte(s)) }

// sync waits until everything given is written and returns the first
// error.
func (r *renderer) sync() error {
	done := make(chan struct{})
	r.jobs <- renderJob{done: done}
	<-done
	return r.err
}

// stop ends the goroutine; nothing is given after it.
func (r *renderer) stop() { close(r.jobs) }
