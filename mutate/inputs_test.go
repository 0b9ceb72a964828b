package mutate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestRegions runs the corpus pods and a few thousand random pods under
// every corpus policy set, each pod encoded as the API server sends it
// (typed), and checks what the core and Patch promise:
//
//   - the core never writes its input;
//   - the input and the result differ only where the core writes: the
//     annotations, the volumes, the pod's resources, runtime class, node
//     selector and tolerations, and the containers' image, env, mounts and
//     resources;
//   - applied to the input with evanphx/json-patch, the patch gives the
//     typed encoding of the result;
//   - a second pass over the patched pod changes nothing.
func TestRegions(t *testing.T) {
	sets := map[string]*policy.Set{}
	var cases []struct {
		name string
		set  golden.Set
		pod  *corev1.Pod
	}
	for _, c := range golden.Cases(t) {
		_, pod := golden.Pod(t, c.Input)
		cases = append(cases, struct {
			name string
			set  golden.Set
			pod  *corev1.Pod
		}{c.Set.Name + "/" + c.Name, c.Set, pod})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 600 {
		pod := randomPod(rng)
		for _, s := range golden.Sets {
			cases = append(cases, struct {
				name string
				set  golden.Set
				pod  *corev1.Pod
			}{fmt.Sprintf("%s/random-%d", s.Name, i), s, pod})
		}
	}
	nsLabels := golden.NamespaceLabels(t)
	patched := 0
	for _, c := range cases {
		set := sets[c.set.Name]
		if set == nil {
			set = golden.Policies(t, c.set.Policies...)
			sets[c.set.Name] = set
		}
		lm, _ := ParseLeakMitigation(c.set.LeakMitigation)
		opts := Options{LeakMitigation: lm}
		ns := c.pod.Namespace
		if ns == "" {
			ns = "default"
		}
		namespace := Namespace{Name: ns, Labels: nsLabels[ns]}
		if checkRegions(t, c.name, c.pod, namespace, set, opts) {
			patched++
		}
	}
	if patched < len(cases)/3 {
		t.Errorf("only %d of %d cases were patched: the random pods miss the policies", patched, len(cases))
	}
}

// checkRegions checks one pod and reports whether it was patched.
func checkRegions(t *testing.T, name string, pod *corev1.Pod, ns Namespace, set *policy.Set, opts Options) bool {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	original := &corev1.Pod{}
	if err := json.Unmarshal(raw, original); err != nil {
		t.Fatal(err)
	}
	pristine := original.DeepCopy()
	res := Pod(original, ns, set, opts)
	if !reflect.DeepEqual(original, pristine) {
		t.Fatalf("%s: the core wrote its input:\n%s", name, cmp.Diff(pristine, original))
	}
	if !res.Changed {
		return false
	}
	if d := outsideRegions(pristine, res.Pod); d != "" {
		t.Fatalf("%s: the core changed the pod outside the regions:\n%s", name, d)
	}
	ops, err := Patch(raw, original, res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	out, b, err := applyOps(t, raw, ops)
	if err != nil {
		t.Fatalf("%s: the patch does not apply: %v\n%s", name, err, b)
	}
	mutated, err := json.Marshal(res.Pod)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, out, mutated) {
		t.Fatalf("%s: the patched pod is not the result:\n%s", name, cmp.Diff(generic(t, mutated), generic(t, out)))
	}
	again := &corev1.Pod{}
	if err := json.Unmarshal(out, again); err != nil {
		t.Fatal(err)
	}
	if Pod(again, ns, set, opts).Changed {
		t.Fatalf("%s: a second pass over the patched pod changed it", name)
	}
	return true
}

// outsideRegions describes how a and b differ outside the regions.
func outsideRegions(a, b *corev1.Pod) string {
	mask := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		p.Annotations = nil
		p.Spec.Volumes = nil
		p.Spec.Resources = nil
		p.Spec.RuntimeClassName, p.Spec.NodeSelector, p.Spec.Tolerations = nil, nil, nil
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				cs[i].Image = ""
				cs[i].Env, cs[i].VolumeMounts, cs[i].Resources = nil, nil, corev1.ResourceRequirements{}
			}
		}
		return p
	}
	return cmp.Diff(mask(a), mask(b))
}

func generic(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(generic(t, a), generic(t, b))
}

// randomPod draws a pod from the shapes the policies react to: sandbox or
// not, init containers and native sidecars, containers named like the ones
// the corpus policies exclude, env vars the policies set (by value or
// valueFrom), mounts and volumes at the policies' paths and names, memory
// emptyDirs (/dev/shm among them), container and pod-level memory,
// annotations, and some with a status annotation of an earlier pass.
func randomPod(r *rand.Rand) *corev1.Pod {
	pick := func(n int) bool { return r.IntN(n) == 0 }
	qty := func() resource.Quantity {
		return resource.MustParse([]string{"128Mi", "512Mi", "1Gi", "2Gi", "3Gi", "8Gi", "12Gi", "8G"}[r.IntN(8)])
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", r.IntN(1000)), Namespace: []string{"sandboxes", "sandboxes-baseline", "default"}[r.IntN(3)]},
	}
	if !pick(5) {
		pod.Labels = map[string]string{"app": "sandbox"}
	} else {
		pod.Labels = map[string]string{"app": "web"}
	}
	if pick(3) {
		pod.Annotations = map[string]string{"team/owner": "rl", "a~b": "c"}
	}
	if pick(15) {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["sandbox-webhook.io/skip"] = "true"
	}
	names := []string{"main", "task", "grader", "istio-proxy", "agent"}
	container := func(i int, init bool) corev1.Container {
		c := corev1.Container{Name: fmt.Sprintf("%s-%d", names[r.IntN(len(names))], i), Image: "img"}
		if init && pick(2) {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		for e := range r.IntN(4) {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", e), Value: "v"})
		}
		switch r.IntN(6) {
		case 0:
			c.Env = append(c.Env, corev1.EnvVar{Name: "UV_LINK_MODE", Value: "hardlink"})
		case 1:
			c.Env = append(c.Env, corev1.EnvVar{Name: "UV_LINK_MODE", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}})
		case 2:
			c.Env = append(c.Env, corev1.EnvVar{Name: "UV_LINK_MODE", Value: "copy"})
		}
		if pick(4) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "own-cache", MountPath: "/root/.cache/uv"})
		}
		if pick(3) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "shm", MountPath: "/dev/shm"})
		}
		if pick(3) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
		}
		if pick(2) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: qty()}
		}
		if pick(3) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: qty()}
			if req, ok := c.Resources.Requests[corev1.ResourceMemory]; ok && req.Cmp(c.Resources.Limits[corev1.ResourceMemory]) > 0 {
				c.Resources.Limits[corev1.ResourceMemory] = req
			}
		}
		if pick(4) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		}
		return c
	}
	for i := range r.IntN(3) {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, container(i, true))
	}
	for i := range 1 + r.IntN(4) {
		pod.Spec.Containers = append(pod.Spec.Containers, container(i, false))
	}
	memory := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	for _, v := range []corev1.Volume{
		{Name: "own-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: memory.DeepCopy()}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptrQty(resource.MustParse("2Gi"))}}},
		{Name: "uv-cache", VolumeSource: corev1.VolumeSource{EmptyDir: memory.DeepCopy()}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
	} {
		if pick(3) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	if pick(5) {
		pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: qty()}}
	} else if pick(8) {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	}
	if pick(30) {
		pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	}
	return pod
}

func ptrQty(q resource.Quantity) *resource.Quantity { return &q }

// TestPathLess pins the order of operations: segment by segment, numbers
// as numbers, a path before the paths under it.
func TestPathLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"/spec/volumes/2", "/spec/volumes/10", true},
		{"/spec/volumes/10", "/spec/volumes/2", false},
		{"/spec/volumes", "/spec/volumes/0", true},
		{"/spec/volumes/0", "/spec/volumes", false},
		{"/metadata/annotations", "/spec", true},
		{"/spec/containers/0/env/1", "/spec/containers/0/env/1", false},
		{"/spec/containers/1/env", "/spec/containers/0/volumeMounts", false},
		{"/spec/containers/0/env", "/spec/containers/0/envFrom", true},
		{"/a~1b", "/a~1c", true},
		{"", "/a", true},
	} {
		if got := pathLess(c.a, c.b); got != c.less {
			t.Errorf("pathLess(%q, %q) = %v, want %v", c.a, c.b, got, c.less)
		}
	}
}
