package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// uvMedium returns the medium of the uv cache in a dry-run create of a
// sandbox pod in ns, the way the apiserver would store it right now.
// It reports whether the medium is want, and what it saw.
func uvMedium(t *testing.T, ns string, want corev1.StorageMedium) error {
	got, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), testkit.SandboxPod(ns, "mode-probe", sleeping), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err
	}
	v := volumeAt(got, got.Spec.Containers[0], uvMountPath)
	if v == nil || v.EmptyDir == nil {
		return errors.New("no uv cache emptyDir")
	}
	if v.EmptyDir.Medium != want {
		return fmt.Errorf("medium %q", v.EmptyDir.Medium)
	}
	return nil
}

// Case 6: leak-mitigation flips without a restart by rewriting the mounted
// config file (a ConfigMap update: a symlink swap); pods created afterwards
// get disk-backed caches, and the pod's own memory-backed emptyDirs move to
// disk too. An invalid policy file is rejected, counted, and the last good
// set keeps serving.
func TestModeSwitch(t *testing.T) {
	const ns = "modeswitch"
	in := newInstance(t, "modeswitch", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})

	got := createPod(t, testkit.SandboxPod(ns, "before", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Fatalf("before the switch:%s", joinProblems(p))
	}

	if err := in.config.Update(map[string][]byte{leakMitigationKey: []byte("on\n")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "leak-mitigation on to reach the webhook", time.Minute, func() error {
		return uvMedium(t, ns, corev1.StorageMediumDefault)
	})
	pod := testkit.SandboxPod(ns, "after-on", sleeping)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "dshm", MountPath: "/dev/shm"}}
	got = createPod(t, pod)
	if p := seedProblems(got, corev1.StorageMediumDefault); len(p) > 0 {
		t.Errorf("after leak-mitigation on:%s", joinProblems(p))
	}
	if v := volumeByName(got, "scratch"); v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumDefault {
		t.Errorf("the pod's own memory emptyDir was not moved to disk: %+v", v)
	}
	if v := volumeByName(got, "dshm"); v == nil || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("/dev/shm, which the policy keeps on tmpfs, changed: %+v", v)
	}

	if err := in.config.Update(map[string][]byte{leakMitigationKey: []byte("policy\n")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "leak-mitigation policy to reach the webhook", time.Minute, func() error {
		return uvMedium(t, ns, corev1.StorageMediumMemory)
	})

	// An invalid policy set: a misspelled field. The server must keep the
	// last good set and say so in its metrics.
	errorsBefore := in.metric(t, "sandbox_webhook_policy_reload_errors_total")
	if err := in.policies.Update(map[string][]byte{"sandbox-seed.yaml": []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: sandbox-seed
spec:
  mode: disk
  match:
    podSelector:
      matchLabels:
        app: sandbox
  cachez:
    - name: uv-cache
      mountPath: /root/.cache/uv
`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the webhook to report the invalid policy", time.Minute, func() error {
		if n := in.metric(t, "sandbox_webhook_policy_reload_errors_total"); n <= errorsBefore {
			return fmt.Errorf("sandbox_webhook_policy_reload_errors_total %v", n)
		}
		return nil
	})
	got = createPod(t, testkit.SandboxPod(ns, "after-invalid", sleeping))
	if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
		t.Errorf("after an invalid policy update the last good set should serve:%s", joinProblems(p))
	}
	// The rejection is visible on /status: the errors name the bad field,
	// and the serving set is still the last good one.
	raw, err := in.webhook.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Policies struct {
			Errors   []string
			Policies []struct{ Name, Mode string }
		}
	}
	if err := json.Unmarshal([]byte(raw), &status); err != nil {
		t.Fatalf("/status: %v\n%s", err, raw)
	}
	if !strings.Contains(strings.Join(status.Policies.Errors, "\n"), "cachez") {
		t.Errorf("/status policies.errors %q do not name the misspelled field cachez", status.Policies.Errors)
	}
	if len(status.Policies.Policies) != 1 || status.Policies.Policies[0].Name != "sandbox-seed" || status.Policies.Policies[0].Mode != "memory" {
		t.Errorf("/status serving policies %+v, want the last good sandbox-seed in memory mode", status.Policies.Policies)
	}
	if code, body, err := in.webhook.Readyz(t.Context()); err != nil || code != 200 {
		t.Errorf("/readyz after an invalid policy update: %d %q %v; the last good set is serving, so it should stay ready", code, body, err)
	}

	// A valid policy update switches the mode by itself: the disk example.
	disk, err := harness.ReadDir(filepath.Join(suite.root, "examples/policies/disk"))
	if err != nil {
		t.Fatal(err)
	}
	if err := in.policies.Update(disk); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the disk-mode policy to reach the webhook", time.Minute, func() error {
		return uvMedium(t, ns, corev1.StorageMediumDefault)
	})
	got = createPod(t, testkit.SandboxPod(ns, "after-disk-policy", sleeping))
	if p := seedProblems(got, corev1.StorageMediumDefault); len(p) > 0 {
		t.Errorf("after the disk-mode policy:%s", joinProblems(p))
	}
}
