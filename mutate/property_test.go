package mutate_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/predict"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

func mem(s string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(s)}
}

// propertyPolicies are policy fragments that disagree with each other in
// every way the core arbitrates: modes, memory levels, keep lists, names,
// paths, env conflicts, container selection, shadow, two shms, two disk
// budgets, two runtimes (override and keep), two mirrors of Docker Hub
// and two PATH entries.
var propertyPolicies = []string{
	`metadata: {name: p-memory-cache}
spec:
  mode: memory
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: uv-cache, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]
  env: [{name: UV_LINK_MODE, value: copy}]
  memory: {limit: 8Gi}`,
	`metadata: {name: p-disk-keeps-shm}
spec:
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  keepMemoryVolumes: [{mountPath: /dev/shm}]
  caches: [{name: pip-cache, mountPath: /root/.cache/pip}]
  env: [{name: UV_LINK_MODE, value: symlink, onConflict: override}]`,
	`metadata: {name: p-disk-keeps-nothing}
spec:
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  env: [{name: DISK, value: "1"}]`,
	`metadata: {name: p-container-memory}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  containers: {exclude: ["grader"], initContainers: false}
  memory: {limit: 6Gi, request: 1Gi, level: container}`,
	`metadata: {name: p-pod-memory-request}
spec:
  match: {namespaces: ["sandbox*"]}
  memory: {limit: 2Gi, request: 512Mi}`,
	`metadata: {name: p-same-names}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: uv-cache, mountPath: /cache/uv}, {name: scratch, mountPath: /root/.cache/pip}]
  assets: [{name: rebench-v2, mountPath: /opt/rebench-v2, hostPath: {path: /mnt/shared/r}, image: {reference: "r.example.com/r:1"}}]`,
	`metadata: {name: p-shadow}
spec:
  enforcement: shadow
  mode: disk
  match: {podSelector: {matchLabels: {app: sandbox}}}
  caches: [{name: shadow-cache, mountPath: /shadow}]
  memory: {limit: 16Gi}`,
	`metadata: {name: p-asset-hostpath}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  assets: [{name: data, mountPath: /opt/rebench-v2, hostPath: {path: /mnt/shared/data}}]`,
	`metadata: {name: p-shm-disk}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  containerLimits: raise
  caches: [{name: uv-cache, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]
  shm: {sizeLimit: 1Gi}
  disk: {limit: 10Gi}`,
	`metadata: {name: p-shm-other}
spec:
  mode: disk
  match: {namespaces: ["sandbox*"]}
  containers: {include: ["main", "grader"]}
  caches: [{name: tmp-cache, mountPath: /cache/tmp}]
  shm: {name: shm-other, sizeLimit: 512Mi}
  disk: {limit: 5Gi, request: 1Gi}`,
	`metadata: {name: p-placement-override}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  runtime:
    className: gvisor
    tolerations: [{key: sandbox.gke.io/runtime, value: gvisor, effect: NoSchedule}]
    nodeSelector: {pool: gvisor}
    onConflict: override
  imageMirrors: [{from: docker.io/library, to: mirror.example.com/library}]
  env: [{name: PATH, value: /opt/tools/bin, position: prepend, ifUnset: /usr/bin:/bin}]
  assets: [{name: tools, mountPath: /opt/tools, hostPath: {path: /mnt/shared/tools}, image: {reference: "tools:1"}, imageForRuntimeClasses: [gvisor]}]`,
	`metadata: {name: p-placement-keep}
spec:
  match: {namespaces: ["sandbox*"]}
  containers: {include: ["main"]}
  runtime:
    className: kata
    tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: 30}]
    nodeSelector: {pool: kata}
  imageMirrors: [{from: docker.io, to: mirror.example.org/hub}, {from: ghcr.io, to: mirror.example.org/ghcr}]
  env: [{name: PATH, value: /opt/kata/bin, position: append}, {name: PYTHONPATH, value: /opt/py, position: prepend, separator: ";"}]`,
}

// TestPolicyCombinations runs every corpus pod, and hostile variants of some
// (hostileVariants), under every combination of up to three of
// propertyPolicies, in both leak-mitigation overrides, and requires of each
// result what the core promises: idempotent, convergent under reinvocation,
// never a pod the apiserver rejects for its memory unless the input already
// was, and never a policy host path mounted writable or at a path the policy
// did not name unless the input pod itself mounted it so.
func TestPolicyCombinations(t *testing.T) {
	var combos [][]int
	n := len(propertyPolicies)
	for i := 0; i < n; i++ {
		combos = append(combos, []int{i})
		for j := i + 1; j < n; j++ {
			combos = append(combos, []int{i, j})
			for k := j + 1; k < n; k++ {
				combos = append(combos, []int{i, j, k})
			}
		}
	}
	labels := golden.NamespaceLabels(t)
	var pods []string
	for _, c := range golden.Cases(t) {
		if c.Set.Name == golden.Sets[0].Name {
			pods = append(pods, c.Input)
		}
	}
	inputs := map[string]*corev1.Pod{}
	for _, in := range pods {
		_, pod := golden.Pod(t, in)
		inputs[in] = pod
		if in == "testdata/pods/basic.yaml" || in == "testdata/pods/init-and-sidecar.yaml" {
			for name, v := range hostileVariants(pod) {
				inputs[in+" "+name] = v
				pods = append(pods, in+" "+name)
			}
		}
	}
	checked := 0
	for _, combo := range combos {
		var docs, names []string
		for _, i := range combo {
			docs = append(docs, header+propertyPolicies[i])
			names = append(names, strings.TrimSuffix(strings.Fields(propertyPolicies[i])[2], "}"))
		}
		set := parseSet(t, docs...)
		for _, lm := range []mutate.LeakMitigation{mutate.LeakMitigationPolicy, mutate.LeakMitigationOn} {
			for _, in := range pods {
				pod := inputs[in]
				ns := mutate.Namespace{Name: pod.Namespace, Labels: labels[pod.Namespace]}
				opts := mutate.Options{LeakMitigation: lm}
				name := fmt.Sprintf("%s %v leak-mitigation=%s", in, names, lm)

				first := mutate.Pod(pod, ns, set, opts)
				if again := mutate.Pod(first.Pod, ns, set, opts); again.Changed {
					t.Errorf("%s: second pass changed the pod:\n%s", name, cmp.Diff(first.Pod, again.Pod))
				}
				// Reinvocation after another webhook added a container
				// converges to a single pass over the pod that had it.
				late := corev1.Container{Name: "late", Image: "i", Resources: corev1.ResourceRequirements{Requests: mem("128Mi")}}
				reinvoked := first.Pod.DeepCopy()
				reinvoked.Spec.Containers = append(reinvoked.Spec.Containers, late)
				got := mutate.Pod(reinvoked, ns, set, opts).Pod
				fresh := pod.DeepCopy()
				fresh.Spec.Containers = append(fresh.Spec.Containers, late)
				want := mutate.Pod(fresh, ns, set, opts).Pod
				sortVolumes(got)
				sortVolumes(want)
				if !apiequality.Semantic.DeepEqual(got, want) {
					t.Errorf("%s: reinvocation did not converge (-single +reinvoked):\n%s", name, cmp.Diff(want, got))
				}
				for _, p := range hostPathMountProblems(pod, first.Pod, set) {
					t.Errorf("%s: %s", name, p)
				}
				before := predict.PodResourceProblems(&pod.Spec)
				if after := predict.PodResourceProblems(&first.Pod.Spec); len(before) == 0 && len(after) > 0 {
					t.Errorf("%s: the mutated pod would be rejected: %v", name, after)
				}
				checked++
			}
		}
	}
	t.Logf("%d pod × policy-combination × mode cases", checked)
}

// hostileVariants are pod with mounts a pod author might write to get a
// policy's host path mounted their way: by the name of a propertyPolicies
// volume the pod does not declare, elsewhere, writable, through a subPath,
// with mount propagation, in an init container.
func hostileVariants(pod *corev1.Pod) map[string]*corev1.Pod {
	hostToContainer := corev1.MountPropagationHostToContainer
	out := map[string]*corev1.Pod{}
	for name, m := range map[string]corev1.VolumeMount{
		"hostile-elsewhere":   {Name: "rebench-v2", MountPath: "/data"},
		"hostile-writable":    {Name: "data", MountPath: "/opt/rebench-v2"},
		"hostile-subpath":     {Name: "rebench-v2", MountPath: "/opt/rebench-v2", ReadOnly: true, SubPath: "x"},
		"hostile-propagation": {Name: "data", MountPath: "/opt/rebench-v2", ReadOnly: true, MountPropagation: &hostToContainer},
		"hostile-cache":       {Name: "uv-cache", MountPath: "/data"},
	} {
		v := pod.DeepCopy()
		cs := v.Spec.Containers
		if len(v.Spec.InitContainers) > 0 {
			cs = v.Spec.InitContainers
		}
		cs[0].VolumeMounts = append(cs[0].VolumeMounts, m)
		out[name] = v
	}
	return out
}

// hostPathMountProblems returns the mounts of out that resolve to a host
// path of one of set's assets other than read-only and whole at that asset's
// mountPath, without mount propagation, unless in has the same mount of a
// volume with the same host path (the pod author's own).
func hostPathMountProblems(in, out *corev1.Pod, set *policy.Set) []string {
	assets := map[string][]string{} // host path → mount paths
	for _, p := range set.Policies {
		for _, a := range p.Spec.Assets {
			if a.HostPath != nil {
				assets[a.HostPath.Path] = append(assets[a.HostPath.Path], a.MountPath)
			}
		}
	}
	hostPath := func(pod *corev1.Pod, volume string) string {
		for _, v := range pod.Spec.Volumes {
			if v.Name == volume && v.HostPath != nil {
				return v.HostPath.Path
			}
		}
		return ""
	}
	own := map[string]bool{}
	for _, m := range allMounts(in) {
		if hp := hostPath(in, m.Name); hp != "" {
			own[fmt.Sprintf("%s %+v", hp, m)] = true
		}
	}
	var problems []string
	for _, m := range allMounts(out) {
		hp := hostPath(out, m.Name)
		mountPaths, ok := assets[hp]
		if !ok || own[fmt.Sprintf("%s %+v", hp, m)] {
			continue
		}
		if !m.ReadOnly || m.SubPath != "" || m.SubPathExpr != "" || !slices.Contains(mountPaths, m.MountPath) ||
			m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
			problems = append(problems, fmt.Sprintf("host path %s of a policy is mounted as %+v", hp, m))
		}
	}
	for _, c := range append(slices.Clone(out.Spec.InitContainers), out.Spec.Containers...) {
		for _, d := range c.VolumeDevices {
			if _, ok := assets[hostPath(out, d.Name)]; ok {
				problems = append(problems, fmt.Sprintf("host path of a policy is used as device %+v", d))
			}
		}
	}
	return problems
}

func allMounts(pod *corev1.Pod) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, c := range pod.Spec.InitContainers {
		out = append(out, c.VolumeMounts...)
	}
	for _, c := range pod.Spec.Containers {
		out = append(out, c.VolumeMounts...)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		out = append(out, c.VolumeMounts...)
	}
	return out
}
