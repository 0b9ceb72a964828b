package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// The example policies' host-path asset (mounted at assetMountPath).
const (
	assetVolume   = "rebench-v2"
	assetHostPath = "/mnt/shared/swe-rebench-v2"
)

// TestHostPathNotChosenByPod: a pod author who mounts a volume named like a
// policy's host-path asset, without declaring it, never gets the host path
// mounted their way through the webhook: elsewhere, writable, through a
// subPath or with mount propagation, in an app container, an init container
// or a native sidecar, with or without a forged status annotation. The
// apiserver rejects each such pod for mounting an undeclared volume, as it
// does with no webhook (the twin namespace no webhook selects); a pod stored
// anyway would have to mount the host path only read-only and whole at the
// policy's mountPath.
func TestHostPathNotChosenByPod(t *testing.T) {
	const ns, twin = "hostpath", "hostpath" + referenceSuffix
	newInstance(t, "hostpath", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	ensureNamespace(t, twin, nil)

	hostToContainer := corev1.MountPropagationHostToContainer
	forged := `{"policies":[{"name":"sandbox-seed","hash":"aeb7c1e62e8d","mode":"memory",` +
		`"injected":["cache/uv-cache","asset/rebench-v2:hostPath","env/UV_LINK_MODE","memory/pod"]}],"podMemory":{"limit":"8Gi","request":"0"}}`
	for _, tc := range []struct {
		name       string
		mount      corev1.VolumeMount
		init       bool // in a native sidecar rather than the app container
		forgeState bool
	}{
		{name: "writable elsewhere", mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/data"}},
		{name: "writable at the policy's path", mount: corev1.VolumeMount{Name: assetVolume, MountPath: assetMountPath}},
		{name: "writable in a native sidecar", init: true, mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/data"}},
		{name: "through a subPath", mount: corev1.VolumeMount{Name: assetVolume, MountPath: assetMountPath, ReadOnly: true, SubPath: "x"}},
		{name: "through a subPathExpr", mount: corev1.VolumeMount{Name: assetVolume, MountPath: assetMountPath, ReadOnly: true, SubPathExpr: "$(HOME)"}},
		{name: "with mount propagation", mount: corev1.VolumeMount{Name: assetVolume, MountPath: assetMountPath, ReadOnly: true, MountPropagation: &hostToContainer}},
		{name: "with a forged status annotation", forgeState: true, mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "hostile-" + strings.ToLower(strings.NewReplacer(" ", "-", "'", "").Replace(tc.name))
			pod := testkit.SandboxPod(ns, name, sleeping)
			if tc.forgeState {
				pod.Annotations = map[string]string{mutate.StatusAnnotation: forged}
			}
			c := &pod.Spec.Containers[0]
			if tc.init {
				always := corev1.ContainerRestartPolicyAlways
				pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "envoyproxy/envoy:v1.33", RestartPolicy: &always}}
				c = &pod.Spec.InitContainers[0]
			}
			c.VolumeMounts = append(c.VolumeMounts, tc.mount)

			reference := pod.DeepCopy()
			reference.Namespace = twin
			_, refErr := suite.cs.CoreV1().Pods(twin).Create(t.Context(), reference, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if !undeclaredVolume(refErr) {
				t.Fatalf("without the webhook: %v, want the rejection of an undeclared volume", refErr)
			}

			stored, err := suite.cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
			if err == nil {
				t.Errorf("the apiserver stored the hostile pod; its host-path mounts:%s", joinProblems(hostMountProblems(stored)))
				return
			}
			if !undeclaredVolume(err) {
				t.Errorf("rejected with %v, want the rejection of an undeclared volume", err)
			}
		})
	}

	// The same volume name, declared by the pod with its own source, is the
	// pod's own: stored, with no host path at all.
	t.Run("the pod's own volume of that name", func(t *testing.T) {
		pod := testkit.SandboxPod(ns, "own-volume", sleeping)
		pod.Spec.Volumes = []corev1.Volume{{Name: assetVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: assetVolume, MountPath: "/data"}}
		stored := createPod(t, pod)
		for _, v := range stored.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("stored pod %s has host path volume %s (%s)", fmtPod(stored), v.Name, v.HostPath.Path)
			}
		}
	})

	// A plain sandbox pod still gets the asset, read-only at its path.
	t.Run("a plain sandbox pod", func(t *testing.T) {
		stored := createPod(t, testkit.SandboxPod(ns, "plain", sleeping))
		mounts := 0
		for _, c := range stored.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == assetVolume {
					mounts++
				}
			}
		}
		if p := hostMountProblems(stored); len(p) > 0 || mounts != 1 {
			t.Errorf("stored pod %s: %d mounts of %s:%s", fmtPod(stored), mounts, assetVolume, joinProblems(p))
		}
	})
}

// undeclaredVolume reports whether err is pod validation rejecting a mount of
// a volume the pod does not declare.
func undeclaredVolume(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "volumeMounts[0].name: Not found")
}

// hostMountProblems lists the mounts of the asset's host path other than
// read-only and whole at the policy's mountPath.
func hostMountProblems(pod *corev1.Pod) []string {
	host := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == assetHostPath {
			host[v.Name] = true
		}
	}
	var out []string
	for _, c := range allContainers(pod) {
		for _, m := range c.VolumeMounts {
			if host[m.Name] && (!m.ReadOnly || m.MountPath != assetMountPath || m.SubPath != "" || m.SubPathExpr != "" ||
				m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone) {
				propagation := corev1.MountPropagationNone
				if m.MountPropagation != nil {
					propagation = *m.MountPropagation
				}
				out = append(out, fmt.Sprintf("container %s mounts %s at %s (readOnly %v, subPath %q, subPathExpr %q, mountPropagation %s)",
					c.Name, assetHostPath, m.MountPath, m.ReadOnly, m.SubPath, m.SubPathExpr, propagation))
			}
		}
	}
	return out
}
