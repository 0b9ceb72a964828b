//go:build race

package e2e

// raceEnabled says the test binary (the client side of the burst) runs
// with the race detector, which slows it down.
const raceEnabled = true
