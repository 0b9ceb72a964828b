package mutate

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

func TestEphemeralMirrors(t *testing.T) {
	set, err := policy.ParseSet("mirrors.yaml", []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: a-hub}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  imageMirrors: [{from: docker.io, to: mirror.example.com/hub}]
---
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: b-ghcr}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  imageMirrors: [{from: ghcr.io, to: mirror.example.com/ghcr}, {from: docker.io/library, to: mirror.example.com/library}]
---
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: c-shadow}
spec:
  enforcement: shadow
  match: {podSelector: {matchLabels: {app: sandbox}}}
  imageMirrors: [{from: quay.io, to: mirror.example.com/quay}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ephemeral := func(images ...string) []corev1.EphemeralContainer {
		var out []corev1.EphemeralContainer
		for i, img := range images {
			out = append(out, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: string(rune('a' + i)), Image: img}})
		}
		return out
	}
	stored := &corev1.Pod{}
	stored.Labels = map[string]string{"app": "sandbox"}
	stored.Spec.EphemeralContainers = ephemeral("busybox")
	pod := stored.DeepCopy()
	pod.Spec.EphemeralContainers = ephemeral("busybox", "busybox:1.36", "ghcr.io/org/debug:v1", "quay.io/debug", "bad image")
	// An attempt to relabel on the subresource changes nothing: old's labels count.
	pod.Labels = nil

	original := pod.DeepCopy()
	items := EphemeralMirrors(pod, stored, Namespace{Name: "sandboxes"}, set, Options{})
	if want := []string{"mirror/b", "mirror/c"}; !cmp.Equal(items, want) {
		t.Errorf("items %v, want %v", items, want)
	}
	want := ephemeral("busybox", "mirror.example.com/hub/library/busybox:1.36", "mirror.example.com/ghcr/org/debug:v1", "quay.io/debug", "bad image")
	if d := cmp.Diff(want, pod.Spec.EphemeralContainers); d != "" {
		t.Errorf("ephemeral containers (-want +got):\n%s", d)
	}
	// Only the images of ephemeral containers change, and the webhook's
	// patch, the diff of the whole pods, changes them.
	masked := pod.DeepCopy()
	for i := range masked.Spec.EphemeralContainers {
		masked.Spec.EphemeralContainers[i].Image = original.Spec.EphemeralContainers[i].Image
	}
	if d := cmp.Diff(original, masked); d != "" {
		t.Errorf("EphemeralMirrors changed more than images (-before +after):\n%s", d)
	}
	raw, err := json.Marshal(original)
	if err != nil {
		t.Fatal(err)
	}
	ops, result, err := PatchResult(raw, original, pod)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(asJSON(t, wholeDocumentPatch(t, raw, original, pod)), asJSON(t, ops)); d != "" {
		t.Errorf("the patch differs from the whole-document diff (-want +got):\n%s", d)
	}
	if len(ops) != 2 || result == nil {
		t.Fatalf("%d operations and a result %v, want the two mirrored images and a result", len(ops), result != nil)
	}
	checkResult(t, raw, ops, result)

	// A pod no policy selects, or a Windows pod, is left alone.
	other := stored.DeepCopy()
	other.Labels = map[string]string{"app": "web"}
	upd := other.DeepCopy()
	upd.Spec.EphemeralContainers = ephemeral("busybox", "busybox:1.36")
	if items := EphemeralMirrors(upd, other, Namespace{Name: "sandboxes"}, set, Options{}); items != nil || upd.Spec.EphemeralContainers[1].Image != "busybox:1.36" {
		t.Errorf("a pod no policy selects: %v, %v", items, upd.Spec.EphemeralContainers)
	}
	win := stored.DeepCopy()
	win.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	upd = win.DeepCopy()
	upd.Spec.EphemeralContainers = ephemeral("busybox", "busybox:1.36")
	if items := EphemeralMirrors(upd, win, Namespace{Name: "sandboxes"}, set, Options{}); items != nil {
		t.Errorf("a Windows pod: %v", items)
	}
}
