//go:build nomap

// The admission server's build (-tags nomap, as the container image is
// built) leaves out dry-run --map: running exported policies offline takes
// kube-apiserver's admission and CEL code (mapexport/maprun), whose packages
// and init functions would cost every serve process memory and start-up time
// for a command the image never runs.

package cli

import (
	"errors"
	"io"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// buildNote is what version prints after the version: which build this is.
const buildNote = " (nomap: without dry-run --map)"

// errNoMAPRunner is dry-run --map's answer in this build.
var errNoMAPRunner = errors.New("dry-run --map runs exported policies with kube-apiserver's code, " +
	"which this build leaves out (built with -tags nomap, as the container image is); " +
	"use a full build: make build or go install ./cmd/webhook")

// mapRunnerMissing says why this build cannot run dry-run --map.
func mapRunnerMissing() error { return errNoMAPRunner }

// writeMAPComparison is dry-run --map's comparison, which this build cannot
// make; dry-run refuses --map before it gets here.
func writeMAPComparison(io.Writer, *policy.Set, mutate.Options, []*dryRunPod) error {
	return errNoMAPRunner
}
