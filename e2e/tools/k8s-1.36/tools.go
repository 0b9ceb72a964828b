//go:build tools

// Package tools records the command this module builds (kube-apiserver
// 1.36.3) so `go mod tidy` keeps its dependencies.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
