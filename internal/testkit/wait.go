package testkit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// pollInterval is how often Poll calls its condition.
const pollInterval = 50 * time.Millisecond

// Poll calls cond every 50 ms until it returns nil, and returns the time
// it did. It gives up when limit has passed or ctx ends, with cond's last
// error.
func Poll(ctx context.Context, limit time.Duration, cond func() error) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := cond()
		if err == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("gave up after %s (%w); last: %w", limit, context.Cause(ctx), err)
		case <-time.After(pollInterval):
		}
	}
}

// WaitFor polls cond (as Poll does) until it returns nil, and fails t when
// it has not within limit, with what it waited for and cond's last error.
// It is for state that changes asynchronously (reloads, rollouts,
// convergence), with a limit that catches a hang, never for asserting how
// fast anything is.
func WaitFor(t testing.TB, what string, limit time.Duration, cond func() error) {
	t.Helper()
	// Not t.Context(): that ends before a cleanup that waits runs.
	if _, err := Poll(context.Background(), limit, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Holds is cond as a condition for Poll and WaitFor, for a state that has
// nothing more to say about itself than whether it holds.
func Holds(cond func() bool) func() error {
	return func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	}
}

var errNotYet = errors.New("does not hold yet")
