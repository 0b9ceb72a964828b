package mutate_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestPodsOwnVolumeNamedLikeACache: a pod's own tmpfs volume with the name
// of a disk-mode policy's cache is the pod's own item, kept whole: it is not
// converted (which would make it equal to the cache, so that a second pass
// took it for an injection and rewrote the status).
func TestPodsOwnVolumeNamedLikeACache(t *testing.T) {
	set := parseSet(t, header+`metadata: {name: p}
spec:
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: cache, mountPath: /cache, sizeLimit: 1Gi}]
`)
	size := resource.MustParse("1Gi")
	pod := testkit.SandboxPod("", "p")
	pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	ns := mutate.Namespace{Name: "n"}

	first := mutate.Pod(pod, ns, set, mutate.Options{})
	if got := first.Pod.Spec.Volumes[0].EmptyDir.Medium; got != corev1.StorageMediumMemory {
		t.Fatalf("the pod's own volume was changed to medium %q", got)
	}
	if len(first.Warnings) != 1 {
		t.Fatalf("want one warning that the pod's own volume is kept, got %q", first.Warnings)
	}
	if second := mutate.Pod(first.Pod, ns, set, mutate.Options{}); second.Changed {
		t.Fatalf("second pass changed the pod: %s", second.Pod.Annotations[mutate.StatusAnnotation])
	}
}
