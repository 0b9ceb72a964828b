// Package release checks what a release publishes, with no Docker engine: the image
// `make image` builds and `make push` pushes, and the chart `make chart` packages and
// `make push-chart` pushes. The tests run in the repository root, where the Makefile is.
// The Dockerfile's checks are in hack/image, which writes it.
package release

import (
	"fmt"
	"os"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

func TestMain(m *testing.M) {
	root, err := harness.RepoRoot(".")
	if err == nil {
		err = os.Chdir(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
