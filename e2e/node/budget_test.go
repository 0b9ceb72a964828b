//go:build nodee2e

package node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// shmWrite writes twice the runtime's 64 MiB /dev/shm and keeps the exit
// code of the write in /tmp/dd.rc, then stays up to be looked at.
const shmWrite = "dd if=/dev/zero of=/dev/shm/fill bs=1M count=128 2>/tmp/dd.err; echo $? >/tmp/dd.rc; exec sleep 3600"

// TestShmSize: in a sandbox of the budget policy (disk mode: the shm stays
// on tmpfs) /dev/shm is a tmpfs of the policy's 256Mi, and a write of
// 128 MiB succeeds; the same pod without the webhook has the runtime's
// 64 MiB and the write fails.
func TestShmSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		ns, size string
		ok       bool
	}{{nsBudget, "size=262144k", true}, {nsPlain, "size=65536k", false}} {
		t.Run(tc.ns, func(t *testing.T) {
			p, err := runPod(ctx, testkit.SandboxPod(tc.ns, "shm-write", onNode(shmWrite)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = deletePod(ctx, p) })
			line, err := mountLine(ctx, p, "/dev/shm")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(line, " tmpfs ") || !strings.Contains(line, tc.size) {
				t.Errorf("/dev/shm is mounted as %q; want a tmpfs with %s", line, tc.size)
			}
			var rc string
			deadline := time.Now().Add(time.Minute)
			for rc == "" && time.Now().Before(deadline) {
				out, _ := suite.node.Exec(ctx, containerID(p), "cat /tmp/dd.rc 2>/dev/null")
				rc = strings.TrimSpace(out)
				time.Sleep(200 * time.Millisecond)
			}
			msg, _ := suite.node.Exec(ctx, containerID(p), "cat /tmp/dd.err")
			if got := rc == "0"; got != tc.ok {
				t.Errorf("writing 128 MiB to /dev/shm: exit code %q (%s); want success %v", rc, strings.TrimSpace(msg), tc.ok)
			}
			t.Logf("%s: /dev/shm %s, 128 MiB write exit code %s", tc.ns, tc.size, rc)
		})
	}
}

// TestDiskBudget: a sandbox that writes past its 64Mi budget is evicted by
// the kubelet while a neighbour within it keeps running; without the
// webhook the same writer runs on.
func TestDiskBudget(t *testing.T) {
	ctx := context.Background()
	write := func(mib string) string {
		return "dd if=/dev/zero of=/tmp/fill bs=1M count=" + mib + " 2>/dev/null; sync; exec sleep 3600"
	}
	over, err := runPod(ctx, testkit.SandboxPod(nsBudget, "disk-over", onNode(write("100"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deletePod(ctx, over) })
	within, err := runPod(ctx, testkit.SandboxPod(nsBudget, "disk-within", onNode(write("8"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deletePod(ctx, within) })
	plain, err := runPod(ctx, testkit.SandboxPod(nsPlain, "disk-over", onNode(write("100"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deletePod(ctx, plain) })
	if c := over.Spec.Containers[0]; c.Resources.Limits.StorageEphemeral().String() != "64Mi" {
		t.Fatalf("the budget's pod has ephemeral-storage limits %v", c.Resources.Limits)
	}

	start := time.Now()
	evicted, err := waitPod(ctx, over, "evicted", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("the sandbox over its budget was evicted %.1f s after it ran: %s", took.Seconds(), evicted.Status.Message)
	for _, p := range []*corev1.Pod{within, plain} {
		got, err := suite.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodRunning {
			t.Errorf("%s/%s: phase %s (%s %s); want it running", p.Namespace, p.Name, got.Status.Phase, got.Status.Reason, got.Status.Message)
		}
	}
}
