//go:build race

package admission

// allocSlack is how much more than the server a race-enabled build
// allocates answering a review: its sync.Pool drops a quarter of what is
// put back, so buffers the server reuses are allocated again (measured:
// up to 1.3 times, on long strings).
const allocSlack = 1.35
