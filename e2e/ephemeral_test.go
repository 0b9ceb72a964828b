package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestEphemeralContainerHostPath: on a running sandbox pod that got the
// policy's host-path asset, kubectl debug (an update of
// pods/ephemeralcontainers) cannot add a container that mounts that volume
// writable, through a subPath or subPathExpr, or with mount propagation: the
// apiserver refuses the update with the webhook's reason and stores nothing.
// A container that mounts it read-only and whole, or does not mount it, is
// added as sent.
func TestEphemeralContainerHostPath(t *testing.T) {
	const ns = "ephemeral"
	newInstance(t, "ephemeral", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	pods := suite.cs.CoreV1().Pods(ns)

	stored := createPod(t, testkit.SandboxPod(ns, "debugged", sleeping))
	if v := volumeByName(stored, assetVolume); v == nil || v.HostPath == nil || v.HostPath.Path != assetHostPath {
		t.Fatalf("stored pod %s has no host path volume %s at %s: %+v", fmtPod(stored), assetVolume, assetHostPath, stored.Spec.Volumes)
	}

	debug := func(name string, mounts ...corev1.VolumeMount) *corev1.Pod {
		p := stored.DeepCopy()
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: name, Image: "busybox:1.37", Command: []string{"sh"}, Stdin: true, TTY: true,
				VolumeMounts: mounts,
			},
			TargetContainerName: "main",
		})
		return p
	}
	hostToContainer := corev1.MountPropagationHostToContainer
	whole := corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets", ReadOnly: true}

	for _, tc := range []struct {
		name  string
		mount corev1.VolumeMount
		want  string // in the refusal
	}{
		{name: "writable", mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets"}, want: "not readOnly"},
		{name: "writable at the policy's path", mount: corev1.VolumeMount{Name: assetVolume, MountPath: assetMountPath}, want: "not readOnly"},
		{name: "through a subPath", mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets", ReadOnly: true, SubPath: "x"}, want: "with a subPath"},
		{name: "through a subPathExpr", mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets", ReadOnly: true, SubPathExpr: "$(HOME)"}, want: "with a subPathExpr"},
		{name: "with mount propagation", mount: corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets", ReadOnly: true, MountPropagation: &hostToContainer}, want: "with mountPropagation HostToContainer"},
	} {
		t.Run("refused "+tc.name, func(t *testing.T) {
			_, err := pods.UpdateEphemeralContainers(t.Context(), stored.Name, debug("debugger", tc.mount), metav1.UpdateOptions{})
			if err == nil {
				t.Fatalf("the apiserver added an ephemeral container mounting host path volume %s %s", assetVolume, tc.name)
			}
			msg := err.Error()
			if !apierrors.IsForbidden(err) || !strings.Contains(msg, "denied the request") ||
				!strings.Contains(msg, `ephemeral container "debugger" mounts hostPath volume "`+assetVolume+`" `+tc.want) {
				t.Errorf("refused with %v, want the webhook's denial naming the container, the volume and %q", err, tc.want)
			}
			now, err := pods.Get(t.Context(), stored.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(now.Spec.EphemeralContainers) != 0 {
				t.Errorf("the pod has ephemeral containers after a refusal: %+v", now.Spec.EphemeralContainers)
			}
		})
	}

	// Allowed, in order: each update adds one container to what is stored.
	for _, tc := range []struct {
		name   string
		mounts []corev1.VolumeMount
	}{
		{name: "reader", mounts: []corev1.VolumeMount{whole}},
		{name: "bare"},
		{name: "cache", mounts: []corev1.VolumeMount{{Name: "uv-cache", MountPath: "/debug/uv-cache"}}},
	} {
		t.Run("allowed "+tc.name, func(t *testing.T) {
			before, err := pods.Get(t.Context(), stored.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			stored = before
			got, err := pods.UpdateEphemeralContainers(t.Context(), stored.Name, debug(tc.name, tc.mounts...), metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("adding ephemeral container %s: %v", tc.name, err)
			}
			n := len(got.Spec.EphemeralContainers)
			if n != len(before.Spec.EphemeralContainers)+1 {
				t.Fatalf("the pod has %d ephemeral containers, want %d", n, len(before.Spec.EphemeralContainers)+1)
			}
			added := got.Spec.EphemeralContainers[n-1]
			if added.Name != tc.name || !equality.Semantic.DeepEqual(added.VolumeMounts, tc.mounts) {
				t.Errorf("added %s with mounts %+v, want %s with %+v as sent", added.Name, added.VolumeMounts, tc.name, tc.mounts)
			}
			// Nothing else of the pod changed.
			spec, want := got.Spec.DeepCopy(), before.Spec.DeepCopy()
			spec.EphemeralContainers, want.EphemeralContainers = nil, nil
			if !equality.Semantic.DeepEqual(spec, want) || !equality.Semantic.DeepEqual(got.Annotations, before.Annotations) {
				t.Errorf("adding an ephemeral container changed the pod's spec or annotations")
			}
		})
	}
}

// TestEphemeralContainerHostPathWithoutLabel: the check of ephemeral
// containers does not depend on labels the pod's editor controls. A user
// who may update pods removes the sandbox label from a pod that got the
// policy's host-path asset, then adds an ephemeral container mounting that
// volume writable: the apiserver still sends the update (the chart's
// ephemeral-container webhook is scoped by namespace only) and the webhook
// refuses it. A read-only, whole mount is still added; so is any container
// of a pod without hostPath volumes, which the match condition keeps from
// the webhook.
func TestEphemeralContainerHostPathWithoutLabel(t *testing.T) {
	const ns = "ephemeral-unlabelled"
	in := newInstance(t, "ephemeral-unlabelled", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	pods := suite.cs.CoreV1().Pods(ns)

	created := createPod(t, testkit.SandboxPod(ns, "relabelled", sleeping))
	if v := volumeByName(created, assetVolume); v == nil || v.HostPath == nil {
		t.Fatalf("stored pod %s has no host path volume %s: %+v", fmtPod(created), assetVolume, created.Spec.Volumes)
	}
	// kubectl label pod relabelled app-
	stored, err := pods.Patch(t.Context(), created.Name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/labels/app"}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Labels["app"]; ok {
		t.Fatalf("the pod still has label app: %v", stored.Labels)
	}

	debug := func(p *corev1.Pod, name string, mounts ...corev1.VolumeMount) *corev1.Pod {
		p = p.DeepCopy()
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: name, Image: "busybox:1.37", Command: []string{"sh"}, Stdin: true, TTY: true,
				VolumeMounts: mounts,
			},
			TargetContainerName: "main",
		})
		return p
	}

	_, err = pods.UpdateEphemeralContainers(t.Context(), stored.Name,
		debug(stored, "debugger", corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets"}), metav1.UpdateOptions{})
	if err == nil {
		t.Fatalf("the apiserver added an ephemeral container mounting host path volume %s writable to a pod without the sandbox label", assetVolume)
	}
	if msg := err.Error(); !apierrors.IsForbidden(err) || !strings.Contains(msg, "denied the request") ||
		!strings.Contains(msg, `ephemeral container "debugger" mounts hostPath volume "`+assetVolume+`" not readOnly`) {
		t.Errorf("refused with %v, want the webhook's denial naming the container, the volume and not readOnly", err)
	}

	got, err := pods.UpdateEphemeralContainers(t.Context(), stored.Name,
		debug(stored, "reader", corev1.VolumeMount{Name: assetVolume, MountPath: "/debug/assets", ReadOnly: true}), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("adding a read-only ephemeral container: %v", err)
	}
	if n := len(got.Spec.EphemeralContainers); n != 1 || got.Spec.EphemeralContainers[0].Name != "reader" {
		t.Errorf("ephemeral containers after the read-only one: %+v", got.Spec.EphemeralContainers)
	}

	// A pod without hostPath volumes: the match condition keeps its
	// ephemeral containers from the webhook, which would allow them anyway.
	plain := createPod(t, plainPod(ns, "plain"))
	before := in.metric(t, "sandbox_webhook_admission_requests_total")
	if before == 0 {
		// The webhook has answered this test's creates and updates: a
		// count of 0 is a series that is not there, and equal counts below
		// would prove nothing.
		t.Fatal("sandbox_webhook_admission_requests_total reads 0 after the webhook answered this test's requests")
	}
	if _, err := pods.UpdateEphemeralContainers(t.Context(), plain.Name, debug(plain, "debugger"), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("adding an ephemeral container to a pod without hostPath volumes: %v", err)
	}
	if after := in.metric(t, "sandbox_webhook_admission_requests_total"); after != before {
		t.Errorf("the webhook answered %v requests for an ephemeral container of a pod without hostPath volumes", after-before)
	}
}
