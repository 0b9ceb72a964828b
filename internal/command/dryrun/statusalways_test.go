package dryrun

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestStatusAlways: with --status-always, as the chart's guard runs the
// server, an opted-out sandbox pod comes out with the empty status
// annotation and nothing else changed; without it, unchanged.
func TestStatusAlways(t *testing.T) {
	const pod = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: sandboxes, labels: {app: sandbox, sandbox-webhook.io/skip: "true"}}
spec:
  containers:
  - {name: c, image: i}
`
	memory := testkit.Path("examples/policies/memory")
	without, _, code := commandtest.RunCLI(t, cli, pod, "dry-run", "-p", memory, "-f", "-")
	if code != command.ExitOK || strings.Contains(without, "sandbox-webhook.io/status") {
		t.Fatalf("without --status-always: exit code %d:\n%s", code, without)
	}
	with, _, code := commandtest.RunCLI(t, cli, pod, "dry-run", "-p", memory, "-f", "-", "--status-always")
	want := strings.Replace(without, "metadata:\n", "metadata:\n  annotations:\n    sandbox-webhook.io/status: '{\"policies\":[]}'\n", 1)
	if code != command.ExitOK || with != want {
		t.Errorf("with --status-always: exit code %d\n got:\n%s\nwant:\n%s", code, with, want)
	}
}
