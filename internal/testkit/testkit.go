// Package testkit holds the helpers the tests of every module share (the
// product's packages, e2e, charts, hack/bench), so that each is written
// once: the repository's files, free ports, the self-managed CA, the seed
// policy, sandbox pods, polling, the Prometheus metrics, JSON as kubectl
// writes it and the Kubernetes minors the e2e matrix proves.
//
// Package golden, below it, is the golden corpus they all read. Package
// internal/command/commandtest runs the command line in process: a command
// package, as only those may import cobra.
//
// It imports none of the packages whose tests use it (mutate, certs, the
// server, admission), so that their in-package tests can import it without
// a cycle.
package testkit

import (
	"path/filepath"
	"runtime"
)

// Root returns the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Path returns a repository-relative path as an absolute one.
func Path(rel string) string { return filepath.Join(Root(), rel) }
