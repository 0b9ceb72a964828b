package mutate_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

const assetPolicy = header + `metadata: {name: a}
spec:
  match:
    podSelector: {matchLabels: {app: sandbox}}
  assets:
  - name: rebench-v2
    mountPath: /opt/rebench-v2
    hostPath: {path: /var/lib/rebench/v2, type: Directory}
    image: {reference: registry.example/rebench:v2, pullPolicy: IfNotPresent}
`

// On an apiserver that drops image volumes, an asset that would get its
// image source is skipped with a warning; the pod is left as it was (no
// hostPath fallback where Pod Security forbids it), and an asset that gets
// its hostPath source is injected as before.
func TestImageVolumesAgainstCluster(t *testing.T) {
	set := parseSet(t, assetPolicy)
	baseline := mutate.Namespace{Name: "sandboxes", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}
	privileged := mutate.Namespace{Name: "sandboxes"}
	mounted := func(source corev1.VolumeSource) *corev1.Pod {
		p := testkit.SandboxPod("", "p")
		p.Spec.Volumes = []corev1.Volume{{Name: "rebench-v2", VolumeSource: source}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "rebench-v2", MountPath: "/opt/rebench-v2", ReadOnly: true}}
		return p
	}
	dir := corev1.HostPathDirectory
	hostPath := mounted(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/rebench/v2", Type: &dir}})
	image := mounted(corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/rebench:v2", PullPolicy: corev1.PullIfNotPresent}})

	const skipped = `{"policies":[{"name":"a","hash":"HASH","mode":"memory","skipped":["asset/rebench-v2:image: ` + mutate.ImageVolumeDroppedReason + `"]}]}`
	cases := []struct {
		name     string
		ns       mutate.Namespace
		iv       mutate.ImageVolumes
		in       *corev1.Pod
		pod      *corev1.Pod
		status   string
		skipped  []mutate.Decision
		warnings []string
	}{
		{"baseline/unknown", baseline, mutate.ImageVolumesUnknown, testkit.SandboxPod("", "p"), image,
			`{"policies":[{"name":"a","hash":"HASH","mode":"memory","injected":["asset/rebench-v2:image"]}]}`, nil, nil},
		{"baseline/kept", baseline, mutate.ImageVolumesKept, testkit.SandboxPod("", "p"), image,
			`{"policies":[{"name":"a","hash":"HASH","mode":"memory","injected":["asset/rebench-v2:image"]}]}`, nil, nil},
		{"baseline/dropped", baseline, mutate.ImageVolumesDropped, testkit.SandboxPod("", "p"), testkit.SandboxPod("", "p"), skipped,
			[]mutate.Decision{{Policy: "a", Item: "asset/rebench-v2:image", Reason: mutate.ImageVolumeDroppedReason}},
			[]string{`sandbox-webhook: policy "a": asset/rebench-v2:image: ` + mutate.ImageVolumeDroppedReason}},
		// The pod mounts the asset and leaves its volume to the webhook:
		// the apiserver drops that mount with the injected volume, and so
		// does the webhook where it injects none.
		{"baseline/dropped, the pod mounts the asset", baseline, mutate.ImageVolumesDropped, authorMount(), testkit.SandboxPod("", "p"), skipped,
			[]mutate.Decision{{Policy: "a", Item: "asset/rebench-v2:image", Reason: mutate.ImageVolumeDroppedReason}},
			[]string{`sandbox-webhook: policy "a": asset/rebench-v2:image: ` + mutate.ImageVolumeDroppedReason}},
		{"baseline/kept, the pod mounts the asset", baseline, mutate.ImageVolumesKept, authorMount(), image,
			`{"policies":[{"name":"a","hash":"HASH","mode":"memory","injected":["asset/rebench-v2:image"]}]}`, nil, nil},
		{"privileged/dropped", privileged, mutate.ImageVolumesDropped, testkit.SandboxPod("", "p"), hostPath,
			`{"policies":[{"name":"a","hash":"HASH","mode":"memory","injected":["asset/rebench-v2:hostPath"]}]}`, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mutate.Pod(c.in, c.ns, set, mutate.Options{ImageVolumes: c.iv})
			got := res.Pod.DeepCopy()
			status := got.Annotations[mutate.StatusAnnotation]
			delete(got.Annotations, mutate.StatusAnnotation)
			if len(got.Annotations) == 0 {
				got.Annotations = nil
			}
			if diff := cmp.Diff(c.pod, got); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
			if want := strings.ReplaceAll(c.status, "HASH", set.Policies[0].Hash); status != want {
				t.Errorf("status annotation\n got %s\nwant %s", status, want)
			}
			if diff := cmp.Diff(c.skipped, res.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.warnings, res.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// authorMount is a sandbox pod that mounts the asset of assetPolicy as the
// policy does and leaves declaring its volume to the webhook.
func authorMount() *corev1.Pod {
	p := testkit.SandboxPod("", "p")
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "rebench-v2", MountPath: "/opt/rebench-v2", ReadOnly: true}}
	return p
}

// dropImageVolumes does what an apiserver without the ImageVolume gate does
// to a pod it stores: it drops the image volumes and every mount of them.
func dropImageVolumes(p *corev1.Pod) {
	var names []string
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
		if v.Image != nil {
			names = append(names, v.Name)
		}
		return v.Image != nil
	})
	drop := func(cs []corev1.Container) {
		for i := range cs {
			cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return slices.Contains(names, m.Name) })
		}
	}
	drop(p.Spec.InitContainers)
	drop(p.Spec.Containers)
	for i := range p.Spec.EphemeralContainers {
		ms := &p.Spec.EphemeralContainers[i].VolumeMounts
		*ms = slices.DeleteFunc(*ms, func(m corev1.VolumeMount) bool { return slices.Contains(names, m.Name) })
	}
}

// Over the whole corpus, and pods that mount the asset or declare an image
// volume of their own, the pod an apiserver that drops image volumes stores
// is the same with the option dropped as without it (what it stored before
// the option), apart from the status annotation.
func TestImageVolumesDroppedStoresTheSamePod(t *testing.T) {
	same := func(t *testing.T, pod func() *corev1.Pod, ns mutate.Namespace, set *policy.Set, opts mutate.Options) {
		t.Helper()
		kept := mutate.Pod(pod(), ns, set, opts).Pod.DeepCopy()
		opts.ImageVolumes = mutate.ImageVolumesDropped
		dropped := mutate.Pod(pod(), ns, set, opts).Pod.DeepCopy()
		dropImageVolumes(kept)
		dropImageVolumes(dropped)
		for _, p := range []*corev1.Pod{kept, dropped} {
			delete(p.Annotations, mutate.StatusAnnotation)
		}
		if !apiequality.Semantic.DeepEqual(kept, dropped) {
			t.Errorf("stored pods differ (-before +with the option):\n%s", cmp.Diff(kept, dropped))
		}
	}
	for _, c := range golden.Cases(t) {
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			pod := func() *corev1.Pod { _, p := golden.Pod(t, c.Input); return p }
			r := setup(t, c, pod())
			same(t, pod, r.ns, r.set, r.opts)
		})
	}
	baseline := mutate.Namespace{Name: "sandboxes", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}
	ownImage := func() *corev1.Pod {
		p := authorMount()
		p.Spec.Volumes = []corev1.Volume{{Name: "rebench-v2", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: "registry.example/rebench:v2", PullPolicy: corev1.PullIfNotPresent}}}}
		return p
	}
	otherImage := func() *corev1.Pod {
		p := testkit.SandboxPod("", "p")
		p.Spec.Volumes = []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: "registry.example/models:1"}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "models", MountPath: "/models", ReadOnly: true}}
		return p
	}
	for name, pod := range map[string]func() *corev1.Pod{"author-mount": authorMount, "own-image-volume": ownImage, "other-image-volume": otherImage} {
		t.Run(name, func(t *testing.T) { same(t, pod, baseline, parseSet(t, assetPolicy), mutate.Options{}) })
	}
}
