package mutate_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestChargedCacheWarnings: a memory-backed cache mounted into a container
// with a memory limit of its own is charged to that limit, and the warning
// says how much it leaves; nothing is said for the policy's own per-container
// headroom, a disk-backed cache, a shadow policy, a cache the pod keeps its
// own volume for, or a container the cache is not mounted in. A second pass
// says the same, so reinvocation adds nothing new.
func TestChargedCacheWarnings(t *testing.T) {
	const match = "  match: {podSelector: {matchLabels: {app: sandbox}}}\n"
	withLimit := func(lim string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(lim)}
		}
	}
	cases := []struct {
		name   string
		spec   string
		edit   func(*corev1.Pod)
		opts   mutate.Options
		warned []string
	}{{
		name:   "limit above the cache",
		spec:   "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit:   withLimit("3Gi"),
		warned: []string{`sandbox-webhook: policy "p": cache/uv: container "main" limits its memory to 3Gi, and this in-memory cache counts against it: up to 1Gi, leaving 2Gi to its processes before an OOM kill`},
	}, {
		name:   "limit at the cache",
		spec:   "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit:   withLimit("1024Mi"),
		warned: []string{`sandbox-webhook: policy "p": cache/uv: container "main" limits its memory to 1Gi, and this in-memory cache counts against it: up to 1Gi, the whole limit (OOM kill)`},
	}, {
		name:   "cache without a sizeLimit",
		spec:   "  caches: [{name: uv, mountPath: /root/.cache/uv}]\n",
		edit:   withLimit("3Gi"),
		warned: []string{`sandbox-webhook: policy "p": cache/uv: container "main" limits its memory to 3Gi, and this in-memory cache counts against it with no sizeLimit: it can take the whole limit (OOM kill)`},
	}, {
		name: "no limit of its own",
		spec: "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
	}, {
		name: "disk mode",
		spec: "  mode: disk\n  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit: withLimit("3Gi"),
	}, {
		name: "leak mitigation forces disk",
		spec: "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit: withLimit("3Gi"),
		opts: mutate.Options{LeakMitigation: mutate.LeakMitigationOn},
	}, {
		name: "shadow",
		spec: "  enforcement: shadow\n  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit: withLimit("3Gi"),
	}, {
		name: "the pod's own volume of that name is kept",
		spec: "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit: func(p *corev1.Pod) {
			withLimit("3Gi")(p)
			p.Spec.Volumes = []corev1.Volume{{Name: "uv", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		},
		warned: []string{`sandbox-webhook: policy "p": cache/uv: the pod already has a volume named "uv"; the pod's own is kept`},
	}, {
		name: "excluded container",
		spec: "  containers: {exclude: [main]}\n  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit: func(p *corev1.Pod) {
			withLimit("3Gi")(p)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "i"})
		},
	}, {
		name: "the policy's per-container headroom holds the cache",
		spec: "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n  memory: {limit: 8Gi, level: container}\n",
	}, {
		name:   "a limit of the pod's own beside the per-container headroom",
		spec:   "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n  memory: {limit: 8Gi, level: container}\n",
		edit:   withLimit("2Gi"),
		warned: []string{`sandbox-webhook: policy "p": cache/uv: container "main" limits its memory to 2Gi, and this in-memory cache counts against it: up to 1Gi, leaving 1Gi to its processes before an OOM kill`},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := parseSet(t, header+"metadata: {name: p}\nspec:\n"+match+c.spec)
			pod := sandboxPod()
			if c.edit != nil {
				c.edit(pod)
			}
			ns := mutate.Namespace{Name: "sandboxes"}
			first := mutate.Pod(pod, ns, set, c.opts)
			if !slices.Equal(first.Warnings, c.warned) {
				t.Errorf("warnings\n got %q\nwant %q", first.Warnings, c.warned)
			}
			if first.Pod == nil {
				return
			}
			if second := mutate.Pod(first.Pod, ns, set, c.opts); !slices.Equal(second.Warnings, c.warned) {
				t.Errorf("second pass warnings\n got %q\nwant %q", second.Warnings, c.warned)
			}
		})
	}
}
