package mutate_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
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
			first := firstPass(t, set, c.edit, c.opts, c.warned)
			if first.Pod == nil {
				return
			}
			if second := mutate.Pod(first.Pod, first.ns, set, c.opts); !slices.Equal(second.Warnings, c.warned) {
				t.Errorf("second pass warnings\n got %q\nwant %q", second.Warnings, c.warned)
			}
		})
	}
}

// TestRaiseContainerLimits: with containerLimits: raise, a container with a
// memory limit of its own gets it raised by the in-memory caches it mounts,
// its request with it when the two are equal, and nothing is warned; a
// second pass changes nothing; a pod-level limit of the pod's own that
// cannot hold the raised limit keeps the container's, with a warning; the
// policy's own per-container headroom, disk mode and containers that do not
// mount the cache are left alone.
func TestRaiseContainerLimits(t *testing.T) {
	const match = "  match: {podSelector: {matchLabels: {app: sandbox}}}\n  containerLimits: raise\n"
	const caches = "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}, {name: pip, mountPath: /root/.cache/pip, sizeLimit: 512Mi}]\n"
	resources := func(lim, req string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			r := &p.Spec.Containers[0].Resources
			r.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(lim)}
			if req != "" {
				r.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(req)}
			}
		}
	}
	cases := []struct {
		name     string
		spec     string
		edit     func(*corev1.Pod)
		opts     mutate.Options
		lim, req string // the container's memory after the pass ("" absent)
		raised   string // the status's raisedLimits
		warned   []string
	}{{
		name:   "limit and equal request raised by both caches",
		spec:   caches,
		edit:   resources("2Gi", "2Gi"),
		lim:    "3584Mi",
		req:    "3584Mi",
		raised: `[{"container":"main","from":"2Gi","to":"3584Mi","request":true}]`,
	}, {
		name:   "a lower request is kept",
		spec:   caches,
		edit:   resources("2Gi", "1Gi"),
		lim:    "3584Mi",
		req:    "1Gi",
		raised: `[{"container":"main","from":"2Gi","to":"3584Mi"}]`,
	}, {
		name: "no limit of its own",
		spec: caches,
	}, {
		name: "disk mode",
		spec: "  mode: disk\n" + caches,
		edit: resources("2Gi", ""),
		lim:  "2Gi",
	}, {
		name: "leak mitigation forces disk",
		spec: caches,
		edit: resources("2Gi", ""),
		opts: mutate.Options{LeakMitigation: mutate.LeakMitigationOn},
		lim:  "2Gi",
	}, {
		name: "the pod-level limit of the pod's own is below the raised limit",
		spec: caches,
		edit: func(p *corev1.Pod) {
			resources("2Gi", "")(p)
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}
		},
		lim:    "2Gi",
		warned: []string{`sandbox-webhook: policy "p": limits/main: not raised: the pod-level memory limit (3Gi) is below the raised limit (3584Mi); the in-memory caches count against the container's limit`},
	}, {
		name: "the policy's per-container headroom is not raised",
		spec: caches + "  memory: {limit: 8Gi, level: container}\n",
		lim:  "8Gi",
		req:  "0",
	}, {
		// A record is only believed for the limit it names: the pod
		// author, who sets the container's limit anyway, gains nothing by
		// forging one.
		name: "a forged record naming another limit is ignored",
		spec: caches,
		edit: func(p *corev1.Pod) {
			resources("2Gi", "1Gi")(p)
			p.Annotations = map[string]string{mutate.StatusAnnotation: `{"policies":[],"raisedLimits":[{"container":"main","from":"64Gi","to":"1Gi"}]}`}
		},
		lim:    "3584Mi",
		req:    "1Gi",
		raised: `[{"container":"main","from":"2Gi","to":"3584Mi"}]`,
	}, {
		name:   "a container mounting one cache",
		spec:   "  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n",
		edit:   resources("2Gi", ""),
		lim:    "3Gi",
		raised: `[{"container":"main","from":"2Gi","to":"3Gi","request":true}]`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := parseSet(t, header+"metadata: {name: p}\nspec:\n"+match+c.spec)
			first := firstPass(t, set, c.edit, c.opts, c.warned)
			r := first.Pod.Spec.Containers[0].Resources
			if got := quantityString(r.Limits); got != c.lim {
				t.Errorf("limit %q, want %q", got, c.lim)
			}
			if got := quantityString(r.Requests); got != c.req {
				t.Errorf("request %q, want %q", got, c.req)
			}
			if got := raisedRecord(t, first.Pod); got != c.raised {
				t.Errorf("raisedLimits %s, want %s", got, c.raised)
			}
			if second := mutate.Pod(first.Pod, first.ns, set, c.opts); second.Changed {
				t.Errorf("a second pass changed the pod:\n%s", cmp.Diff(first.Pod, second.Pod))
			}
		})
	}
}

// TestRaisedLimitRestored: a pod whose limit an earlier pass raised gets
// its limit and request back when the policy no longer raises them, and the
// warning says the cache counts against the limit again.
func TestRaisedLimitRestored(t *testing.T) {
	const spec = "metadata: {name: p}\nspec:\n  match: {podSelector: {matchLabels: {app: sandbox}}}\n  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]\n"
	raise := parseSet(t, header+spec+"  containerLimits: raise\n")
	keep := parseSet(t, header+spec)
	pod := testkit.SandboxPod("", "p")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	ns := mutate.Namespace{Name: "sandboxes"}
	raised := mutate.Pod(pod, ns, raise, mutate.Options{}).Pod
	if got := quantityString(raised.Spec.Containers[0].Resources.Limits); got != "3Gi" {
		t.Fatalf("raised limit %q, want 3Gi", got)
	}
	back := mutate.Pod(raised, ns, keep, mutate.Options{})
	r := back.Pod.Spec.Containers[0].Resources
	if lim, req := quantityString(r.Limits), quantityString(r.Requests); lim != "2Gi" || req != "2Gi" {
		t.Errorf("limit %q and request %q after the policy stopped raising, want both 2Gi", lim, req)
	}
	if got := raisedRecord(t, back.Pod); got != "" {
		t.Errorf("raisedLimits %s after the policy stopped raising, want none", got)
	}
	want := []string{`sandbox-webhook: policy "p": cache/uv: container "main" limits its memory to 2Gi, and this in-memory cache counts against it: up to 1Gi, leaving 1Gi to its processes before an OOM kill`}
	if !slices.Equal(back.Warnings, want) {
		t.Errorf("warnings\n got %q\nwant %q", back.Warnings, want)
	}
}

// pass is a pass over a pod, with the namespace it ran in.
type pass struct {
	mutate.Result
	ns mutate.Namespace
}

// firstPass runs set over the sandbox pod as edit makes it, in namespace
// sandboxes, and checks the warnings.
func firstPass(t *testing.T, set *policy.Set, edit func(*corev1.Pod), opts mutate.Options, warned []string) pass {
	t.Helper()
	pod := testkit.SandboxPod("", "p")
	if edit != nil {
		edit(pod)
	}
	ns := mutate.Namespace{Name: "sandboxes"}
	res := mutate.Pod(pod, ns, set, opts)
	if !slices.Equal(res.Warnings, warned) {
		t.Errorf("warnings\n got %q\nwant %q", res.Warnings, warned)
	}
	return pass{res, ns}
}

func quantityString(l corev1.ResourceList) string {
	q, ok := l[corev1.ResourceMemory]
	if !ok {
		return ""
	}
	return q.String()
}

// raisedRecord is the raisedLimits of the pod's status annotation, as JSON
// ("" when absent).
func raisedRecord(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	var st struct {
		RaisedLimits json.RawMessage `json:"raisedLimits"`
	}
	if err := json.Unmarshal([]byte(pod.Annotations[mutate.StatusAnnotation]), &st); err != nil {
		t.Fatal(err)
	}
	return string(st.RaisedLimits)
}
