//go:build tools

// Module kyverno builds the pinned Kyverno CLI and admission controller from
// the Go module proxy, for the parity and cutover tests: a module of its
// own, so that the product's dependency graph never holds Kyverno's.
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"
	_ "github.com/kyverno/kyverno/cmd/kyverno"
)
