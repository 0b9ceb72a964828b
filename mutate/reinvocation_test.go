package mutate_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestForeignMountOfPresentHostPathIsDenied: once the pod has a policy's
// hostPath volume (an earlier pass injected it, then another webhook added
// a container; or the pod declared it itself), a container that mounts it
// other than the policy does would run with the host path mounted its way:
// the pod is refused, with the container, the volume and the host path.
// A shadow policy only reports it; a cache (emptyDir) mounted another way is
// reported and kept, as before.
func TestForeignMountOfPresentHostPathIsDenied(t *testing.T) {
	const assets = `
  assets:
  - name: rebench-v2
    mountPath: /opt/rebench-v2
    hostPath: {path: /mnt/shared/swe-rebench-v2}
  caches:
  - {name: uv-cache, mountPath: /root/.cache/uv}
`
	enforce := parseSet(t, header+"metadata: {name: seed}\nspec:\n  match: {podSelector: {matchLabels: {app: sandbox}}}"+assets)
	shadow := parseSet(t, header+"metadata: {name: seed}\nspec:\n  enforcement: shadow\n  match: {podSelector: {matchLabels: {app: sandbox}}}"+assets)
	ns := mutate.Namespace{Name: "rl"}

	first := mutate.Pod(testkit.SandboxPod("", "p"), ns, enforce, mutate.Options{})
	if first.Denied != "" || !first.Changed {
		t.Fatalf("first pass: denied %q, changed %v", first.Denied, first.Changed)
	}
	late := func(m corev1.VolumeMount) *corev1.Pod {
		p := first.Pod.DeepCopy()
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "late", Image: "i", VolumeMounts: []corev1.VolumeMount{m}})
		return p
	}
	hostToContainer := corev1.MountPropagationHostToContainer
	for _, c := range []struct {
		name  string
		mount corev1.VolumeMount
		want  string
	}{
		{"writable elsewhere", corev1.VolumeMount{Name: "rebench-v2", MountPath: "/data"}, `writable at "/data"`},
		{"writable at the policy's path", corev1.VolumeMount{Name: "rebench-v2", MountPath: "/opt/rebench-v2"}, `writable at "/opt/rebench-v2"`},
		{"read-only elsewhere", corev1.VolumeMount{Name: "rebench-v2", MountPath: "/data", ReadOnly: true}, `at "/data"`},
		{"subPath", corev1.VolumeMount{Name: "rebench-v2", MountPath: "/opt/rebench-v2", ReadOnly: true, SubPath: "x"}, `at "/opt/rebench-v2" with a subPath`},
		{"propagation", corev1.VolumeMount{Name: "rebench-v2", MountPath: "/opt/rebench-v2", ReadOnly: true, MountPropagation: &hostToContainer}, `at "/opt/rebench-v2" with mountPropagation HostToContainer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := mutate.Pod(late(c.mount), ns, enforce, mutate.Options{})
			want := `sandbox-webhook: policy "seed": container "late" mounts hostPath volume "rebench-v2" ` + c.want
			if !strings.HasPrefix(res.Denied, want) || !strings.Contains(res.Denied, `host path "/mnt/shared/swe-rebench-v2" only read-only at /opt/rebench-v2`) {
				t.Errorf("denied %q, want it to start with %q and name the host path", res.Denied, want)
			}
			if sh := mutate.Pod(late(c.mount), ns, shadow, mutate.Options{}); sh.Denied != "" {
				t.Errorf("a shadow policy refused the pod: %q", sh.Denied)
			} else if !hasSkip(sh, "asset/rebench-v2:hostPath", "would refuse the pod: ") {
				t.Errorf("a shadow policy does not report the refusal: %+v", sh.Skipped)
			}
		})
	}

	t.Run("declared by the pod itself", func(t *testing.T) {
		p := testkit.SandboxPod("", "p")
		hp := corev1.HostPathDirectory
		p.Spec.Volumes = []corev1.Volume{{Name: "rebench-v2", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/shared/swe-rebench-v2", Type: &hp}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "rebench-v2", MountPath: "/data"}}
		if res := mutate.Pod(p, ns, enforce, mutate.Options{}); !strings.Contains(res.Denied, `container "main" mounts hostPath volume "rebench-v2" writable at "/data"`) {
			t.Errorf("denied %q", res.Denied)
		}
	})

	t.Run("the policy's own mount is no refusal", func(t *testing.T) {
		res := mutate.Pod(late(corev1.VolumeMount{Name: "rebench-v2", MountPath: "/opt/rebench-v2", ReadOnly: true}), ns, enforce, mutate.Options{})
		if res.Denied != "" {
			t.Errorf("denied %q", res.Denied)
		}
	})

	t.Run("a cache mounted another way is reported, not refused", func(t *testing.T) {
		res := mutate.Pod(late(corev1.VolumeMount{Name: "uv-cache", MountPath: "/root/.cache/uv", SubPath: "x"}), ns, enforce, mutate.Options{})
		if res.Denied != "" || !hasSkip(res, "cache/uv-cache", "nothing more is mounted") {
			t.Errorf("denied %q, skipped %+v", res.Denied, res.Skipped)
		}
	})
}

func hasSkip(res mutate.Result, item, reason string) bool {
	for _, d := range res.Skipped {
		if d.Item == item && strings.Contains(d.Reason, reason) {
			return true
		}
	}
	return false
}
