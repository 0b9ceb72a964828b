package mutate_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// trustPolicies select the sandbox pod's containers with every item that
// compares or adds quantities: in-memory caches that raise the container
// limits they count against, and a pod-level memory headroom.
const trustPolicies = header + `metadata: {name: p}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  containers: {exclude: [sidecar]}
  containerLimits: raise
  caches: [{name: uv, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]
  env: [{name: UV_LINK_MODE, value: copy}]
  memory: {limit: 8Gi}
`

// hugeQuantity is a quantity the apiserver stores whose comparison with
// 8Gi, done the way resource.Quantity does it, takes minutes: its exponent
// is computed as a 100-million-digit integer.
const hugeQuantity = "1e100000000"

// quantityField is a quantity of a Pod found by reflection: its path, as
// the refusal names it, and how to put a quantity there.
type quantityField struct {
	path string
	set  func(pod reflect.Value, q resource.Quantity)
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	listType     = reflect.TypeFor[corev1.ResourceList]()
)

// quantityFields lists every quantity of a value of type t, reached through
// structs, pointers, slices (their first element) and resource lists (their
// memory entry).
func quantityFields(t reflect.Type, path string, seen map[reflect.Type]bool) []quantityField {
	wrap := func(inner []quantityField, step func(v reflect.Value) reflect.Value) []quantityField {
		out := make([]quantityField, len(inner))
		for i, f := range inner {
			out[i] = quantityField{path: f.path, set: func(v reflect.Value, q resource.Quantity) { f.set(step(v), q) }}
		}
		return out
	}
	switch {
	case t == quantityType:
		return []quantityField{{path: path, set: func(v reflect.Value, q resource.Quantity) { v.Set(reflect.ValueOf(q)) }}}
	case t == listType:
		return []quantityField{{path: path + "[memory]", set: func(v reflect.Value, q resource.Quantity) {
			if v.IsNil() {
				v.Set(reflect.MakeMap(t))
			}
			v.SetMapIndex(reflect.ValueOf(corev1.ResourceMemory), reflect.ValueOf(q))
		}}}
	case t.Kind() == reflect.Pointer:
		return wrap(quantityFields(t.Elem(), path, seen), func(v reflect.Value) reflect.Value {
			if v.IsNil() {
				v.Set(reflect.New(t.Elem()))
			}
			return v.Elem()
		})
	case t.Kind() == reflect.Slice:
		return wrap(quantityFields(t.Elem(), path+"[0]", seen), func(v reflect.Value) reflect.Value {
			if v.Len() == 0 {
				v.Set(reflect.MakeSlice(t, 1, 1))
			}
			return v.Index(0)
		})
	case t.Kind() == reflect.Struct:
		if seen[t] {
			return nil
		}
		seen[t] = true
		defer delete(seen, t)
		var out []quantityField
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			sub := path
			if name != "" {
				sub = strings.TrimPrefix(path+"."+name, ".")
			}
			out = append(out, wrap(quantityFields(f.Type, sub, seen), func(v reflect.Value) reflect.Value { return v.Field(i) })...)
		}
		return out
	}
	return nil
}

// TestEveryQuantityBounded puts a quantity no node could hold in every
// quantity field of a selected sandbox pod, one at a time: a field of the
// spec refuses the pod, naming the field, before anything is compared; the
// status plays no part. Each pass ends at once: with the quantity compared
// it would run for minutes (the watchdog fails it after 30 s). The same
// value in a shadow policy refuses nothing.
func TestEveryQuantityBounded(t *testing.T) {
	set := parseSet(t, trustPolicies)
	shadow := parseSet(t, strings.Replace(trustPolicies, "spec:\n", "spec:\n  enforcement: shadow\n", 1))
	huge := resource.MustParse(hugeQuantity)
	fields := quantityFields(reflect.TypeFor[corev1.Pod](), "", map[reflect.Type]bool{})
	var inSpec int
	for _, f := range fields {
		t.Run(f.path, func(t *testing.T) {
			pod := testkit.SandboxPod("", "p")
			pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
			f.set(reflect.ValueOf(pod).Elem(), huge)
			res := withWatchdog(t, func() mutate.Result {
				return mutate.Pod(pod, mutate.Namespace{Name: "sandboxes"}, set, mutate.Options{})
			})
			if !strings.HasPrefix(f.path, "spec.") {
				if res.Denied != "" {
					t.Errorf("refused for a field outside the spec: %s", res.Denied)
				}
				return
			}
			inSpec++
			want := `sandbox-webhook: policy "p": ` + f.path + " is a quantity beyond what any node holds"
			if !strings.HasPrefix(res.Denied, want) {
				t.Errorf("refusal %q, want it to start %q", res.Denied, want)
			}
			if res.Changed {
				t.Errorf("a refused pod was changed")
			}
			res = withWatchdog(t, func() mutate.Result {
				return mutate.Pod(pod, mutate.Namespace{Name: "sandboxes"}, shadow, mutate.Options{})
			})
			if res.Denied != "" || res.Changed {
				t.Errorf("a shadow policy refused (%q) or changed (%v) the pod", res.Denied, res.Changed)
			}
		})
	}
	if inSpec < 10 {
		t.Fatalf("found %d quantity fields in the spec, want every container kind's, the pod's, the overhead and the volumes'", inSpec)
	}
}

// withWatchdog runs f and fails the test if it has not returned in 30 s.
func withWatchdog(t *testing.T, f func() mutate.Result) mutate.Result {
	t.Helper()
	done := make(chan mutate.Result, 1)
	go func() { done <- f() }()
	select {
	case res := <-done:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("the pass did not end within 30 s")
		return mutate.Result{}
	}
}

// TestBoundedQuantities: the bound is magnitude below 10^18 and an
// exponent within ±18, whatever the spelling.
func TestBoundedQuantities(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "8Gi": true, "1.5Gi": true, "100m": true, "1n": true, "1e-100000": true, // rounded up to 1n
		"999999999999999999": true, "1e17": true, "512Pi": true, "-8Gi": true, "0.000000000000000001": true,
		"1e18": false, "1000000000000000000": false, "1Ei": false, "1000Ei": false, "1e10000000": false,
		"0e1000000000": false, "-1e19": false, "0.0000000000000000000": false,
	} {
		if got := mutate.Bounded(resource.MustParse(s)); got != want {
			t.Errorf("Bounded(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestForgedStatusNotBelieved: the status annotation is the pod author's to
// write. A record of an earlier pass is believed only for a container a
// policy selects and only when it is exactly what that policy would have
// written there; one with a quantity no node holds is not believed, and
// costs nothing to read.
func TestForgedStatusNotBelieved(t *testing.T) {
	raise := parseSet(t, trustPolicies)
	keep := parseSet(t, strings.Replace(trustPolicies, "  containerLimits: raise\n", "", 1))
	huge := "1e1" + strings.Repeat("0", 1_000_000)
	withSidecar := func(lim, req string) *corev1.Pod {
		pod := testkit.SandboxPod("", "p")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(lim)},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(req)},
		}
		pod.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "i", RestartPolicy: new(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			}}}
		return pod
	}
	cases := []struct {
		name   string
		set    *policy.Set
		status string
		// the main and sidecar containers' memory limits and requests after the pass
		main, mainReq, side, sideReq string
	}{{
		name:   "a record that the limit was raised from 512Gi",
		set:    raise,
		status: `{"policies":[],"raisedLimits":[{"container":"main","from":"512Gi","to":"2Gi","request":true}]}`,
		main:   "3Gi", mainReq: "1Gi", side: "256Mi", sideReq: "256Mi",
	}, {
		name:   "a record that the limit was raised from 1Ki",
		set:    raise,
		status: `{"policies":[],"raisedLimits":[{"container":"main","from":"1Ki","to":"2Gi","request":true}]}`,
		main:   "3Gi", mainReq: "1Gi", side: "256Mi", sideReq: "256Mi",
	}, {
		name:   "a record for a sidecar no policy selects, under a policy that raises",
		set:    raise,
		status: `{"policies":[],"raisedLimits":[{"container":"sidecar","from":"4Ti","to":"256Mi","request":true}]}`,
		main:   "3Gi", mainReq: "1Gi", side: "256Mi", sideReq: "256Mi",
	}, {
		name:   "a record for a sidecar no policy selects, under a policy that no longer raises",
		set:    keep,
		status: `{"policies":[],"raisedLimits":[{"container":"sidecar","from":"1Mi","to":"256Mi","request":true}]}`,
		main:   "2Gi", mainReq: "1Gi", side: "256Mi", sideReq: "256Mi",
	}, {
		name:   "a record whose quantities no node holds",
		set:    raise,
		status: `{"policies":[],"raisedLimits":[{"container":"main","from":"1Ki","to":"` + huge + `"}],"podMemory":{"limit":"` + huge + `","request":"` + huge + `"}}`,
		main:   "3Gi", mainReq: "1Gi", side: "256Mi", sideReq: "256Mi",
	}, {
		name:   "the record an earlier pass wrote is believed",
		set:    keep,
		status: `{"policies":[],"raisedLimits":[{"container":"main","from":"1Gi","to":"2Gi"}]}`,
		main:   "1Gi", mainReq: "1Gi", side: "256Mi", sideReq: "256Mi",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := withSidecar("2Gi", "1Gi")
			pod.Annotations = map[string]string{mutate.StatusAnnotation: c.status}
			res := withWatchdog(t, func() mutate.Result {
				return mutate.Pod(pod, mutate.Namespace{Name: "sandboxes"}, c.set, mutate.Options{})
			})
			got := res.Pod.Spec
			for _, q := range []struct{ what, got, want string }{
				{"main's limit", quantityString(got.Containers[0].Resources.Limits), c.main},
				{"main's request", quantityString(got.Containers[0].Resources.Requests), c.mainReq},
				{"the sidecar's limit", quantityString(got.InitContainers[0].Resources.Limits), c.side},
				{"the sidecar's request", quantityString(got.InitContainers[0].Resources.Requests), c.sideReq},
			} {
				if q.got != q.want {
					t.Errorf("%s %s, want %s", q.what, q.got, q.want)
				}
			}
		})
	}
}

// TestForgedPodMemoryNotBelieved: a podMemory record is believed only for
// values this policy could have written on the pod; a pod-level limit and
// request of the author's own under a record naming them are kept.
func TestForgedPodMemoryNotBelieved(t *testing.T) {
	set := parseSet(t, trustPolicies)
	for _, c := range []struct{ lim, req, status, wantLim, wantReq string }{
		{"1Mi", "1Mi", `{"policies":[],"podMemory":{"limit":"1Mi","request":"1Mi"}}`, "1Mi", "1Mi"},
		{"4Ti", "4Ti", `{"policies":[],"podMemory":{"limit":"4Ti"}}`, "4Ti", "4Ti"},
		// What the policy writes on this pod: believed, and so recomputed
		// (to the same).
		{"8Gi", "0", `{"policies":[],"podMemory":{"limit":"8Gi","request":"0"}}`, "8Gi", "0"},
	} {
		pod := testkit.SandboxPod("", "p")
		pod.Annotations = map[string]string{mutate.StatusAnnotation: c.status}
		pod.Spec.Resources = &corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(c.lim)},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(c.req)},
		}
		res := mutate.Pod(pod, mutate.Namespace{Name: "sandboxes"}, set, mutate.Options{})
		r := res.Pod.Spec.Resources
		if lim, req := quantityString(r.Limits), quantityString(r.Requests); lim != c.wantLim || req != c.wantReq {
			t.Errorf("%s: pod-level limit %s and request %s, want %s and %s", c.status, lim, req, c.wantLim, c.wantReq)
		}
	}
}

// FuzzStatusAnnotation: whatever the status annotation says, a pass ends
// at once, and every memory quantity of the pod ends as the pod had it, as
// the same pod without the annotation gets it, or, for a limit an earlier
// pass raised, as it was before that raise by the policy's own caches: a
// forged record can make the webhook take a value for its own, never move
// it elsewhere.
func FuzzStatusAnnotation(f *testing.F) {
	for _, s := range []string{
		`{"policies":[],"raisedLimits":[{"container":"main","from":"512Gi","to":"2Gi","request":true}]}`,
		`{"policies":[],"raisedLimits":[{"container":"sidecar","from":"4Ti","to":"256Mi","request":true}]}`,
		`{"policies":[],"raisedLimits":[{"container":"main","from":"1Gi","to":"2Gi"}],"podMemory":{"limit":"8Gi","request":"0"}}`,
		`{"policies":[],"raisedLimits":[{"container":"main","from":"1Ki","to":"1e10000000"}]}`,
		`{"policies":[],"podMemory":{"limit":"1e1` + strings.Repeat("0", 100_000) + `"}}`,
		`{"policies":[{"name":"p","hash":"x","mode":"memory","injected":["cache/uv"]}],"converted":["uv"]}`,
	} {
		f.Add(s, "2Gi", "2Gi")
	}
	sets := []*policy.Set{parseSet(f, trustPolicies), parseSet(f, strings.Replace(trustPolicies, "  containerLimits: raise\n", "", 1))}
	ns := mutate.Namespace{Name: "sandboxes"}
	f.Fuzz(func(t *testing.T, status, lim, req string) {
		l, err1 := resource.ParseQuantity(lim)
		r, err2 := resource.ParseQuantity(req)
		if err1 != nil || err2 != nil || !mutate.Bounded(l) || !mutate.Bounded(r) || l.Sign() <= 0 || r.Cmp(l) > 0 {
			return
		}
		pod := testkit.SandboxPod("", "p")
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: l}, Requests: corev1.ResourceList{corev1.ResourceMemory: r},
		}
		pod.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "i", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}}
		for _, set := range sets {
			plain := mutate.Pod(pod, ns, set, mutate.Options{}).Pod
			forged := pod.DeepCopy()
			forged.Annotations = map[string]string{mutate.StatusAnnotation: status}
			start := time.Now()
			got := mutate.Pod(forged, ns, set, mutate.Options{}).Pod
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("a pass took %v", d)
			}
			lowered := l.DeepCopy()
			lowered.Sub(resource.MustParse("1Gi")) // the policy's one cache
			for _, q := range []struct {
				what           string
				got, was, want corev1.ResourceList
			}{
				{"main's limits", got.Spec.Containers[0].Resources.Limits, pod.Spec.Containers[0].Resources.Limits, plain.Spec.Containers[0].Resources.Limits},
				{"main's requests", got.Spec.Containers[0].Resources.Requests, pod.Spec.Containers[0].Resources.Requests, plain.Spec.Containers[0].Resources.Requests},
				{"the sidecar's limits", got.Spec.InitContainers[0].Resources.Limits, pod.Spec.InitContainers[0].Resources.Limits, plain.Spec.InitContainers[0].Resources.Limits},
			} {
				g := q.got[corev1.ResourceMemory]
				if g.Cmp(q.was[corev1.ResourceMemory]) != 0 && g.Cmp(q.want[corev1.ResourceMemory]) != 0 && g.Cmp(lowered) != 0 {
					t.Fatalf("%s: %s, neither the pod's %s nor %s without the annotation", q.what, g.String(),
						quantityString(q.was), quantityString(q.want))
				}
			}
			// The pod sets no pod-level memory: whatever podMemory says,
			// the headroom follows the containers as they end.
			wantReq := mutate.ContainerMemoryRequest(&got.Spec)
			wantLim := resource.MustParse("8Gi")
			for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
				if q := c.Resources.Limits[corev1.ResourceMemory]; q.Cmp(wantLim) > 0 {
					wantLim = q
				}
			}
			if wantReq.Cmp(wantLim) > 0 {
				wantLim = wantReq
			}
			r := got.Spec.Resources
			if r == nil || r.Limits.Memory().Cmp(wantLim) != 0 || r.Requests.Memory().Cmp(wantReq) != 0 {
				b, _ := json.Marshal(r)
				t.Fatalf("pod-level resources %s, want limit %s and request %s from the containers", b, wantLim.String(), wantReq.String())
			}
		}
	})
}
