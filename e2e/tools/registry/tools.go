//go:build tools

// Module registry builds the CNCF distribution registry from the Go module
// proxy for `make cluster-e2e`, which pushes the image and the chart to it
// as the README's install does: a module of its own, so that its storage
// drivers' dependencies never reach the product's or the other tools'.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
