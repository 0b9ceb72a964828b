package dryrun

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// TestDryRunCheckPredictsDenial: a pod that already has the policy's
// hostPath volume (as on reinvocation, after another webhook added a
// container) and mounts it writable in a container is refused by the
// webhook; dry-run says so, and --predict predicts the rejection.
func TestDryRunCheckPredictsDenial(t *testing.T) {
	const pod = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: sandboxes, labels: {app: sandbox}}
spec:
  containers:
  - {name: c, image: i, volumeMounts: [{name: rebench-v2, mountPath: /opt/rebench-v2, readOnly: true}]}
  - {name: late, image: i, volumeMounts: [{name: rebench-v2, mountPath: /data}]}
  volumes:
  - {name: rebench-v2, hostPath: {path: /mnt/shared/swe-rebench-v2, type: Directory}}
`
	const denial = `sandbox-webhook: policy "sandbox-seed": container "late" mounts hostPath volume "rebench-v2" writable at "/data"`
	memory := testkit.Path("examples/policies/memory")

	_, stderr, code := commandtest.RunCLI(t, cli, pod, "dry-run", "-p", memory, "-f", "-")
	if code != command.ExitOK || !strings.Contains(stderr, "  denied: "+denial) {
		t.Errorf("dry-run: exit code %d, want %d and the denial:\n%s", code, command.ExitOK, stderr)
	}
	_, stderr, code = commandtest.RunCLI(t, cli, pod, "dry-run", "-p", memory, "-f", "-", "--predict")
	if code != command.ExitRejected || !strings.Contains(stderr, "check: Pod sandboxes/p: would be rejected:\n  - denied by the webhook: "+denial) {
		t.Errorf("dry-run --predict: exit code %d, want %d and the denial:\n%s", code, command.ExitRejected, stderr)
	}
}

// TestCheckIsPredict: --check, --predict's first name, still predicts, and
// says on stderr, not among the objects on stdout, to use --predict.
func TestCheckIsPredict(t *testing.T) {
	args := []string{"dry-run", "-p", testkit.Path("examples/policies/memory"), "-f", testkit.Path("testdata/pods/basic.yaml"), "--namespaces", testkit.Path(golden.Namespaces)}
	wantOut, wantErr, wantCode := commandtest.RunCLI(t, cli, "", append(args, "--predict")...)
	out, stderr, code := commandtest.RunCLI(t, cli, "", append(args, "--check")...)
	const deprecated = "Flag --check has been deprecated, use --predict instead\n"
	if code != wantCode || out != wantOut || stderr != deprecated+wantErr {
		t.Errorf("--check: exit code %d, stdout\n%s\nstderr\n%s\nwant exit code %d, the same stdout as --predict, and stderr\n%s", code, out, stderr, wantCode, deprecated+wantErr)
	}
	if !strings.Contains(wantErr, "check: Pod sandboxes/basic: accepted") {
		t.Errorf("--predict did not predict:\n%s", wantErr)
	}
}
