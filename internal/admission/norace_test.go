//go:build !race

package admission

// allocSlack is 1: the build users run allocates what the count reserves
// or less (see the race-enabled build's).
const allocSlack = 1.0
