// Package gobench holds the go test benchmarks of the product's packages
// that read benchdata's inputs: the core alone (mutate.Pod), the admission
// handler against its floor (BenchmarkReview, whose ratios benchratio
// computes for make bench) and reading a List as dry-run does. They are
// here, beside their inputs, so that the product's module holds no bench
// support; each uses only what its package exports.
package gobench
