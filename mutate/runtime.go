package mutate

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// runtime places the pod: the policy's runtimeClassName, tolerations and
// nodeSelector entries. The API server's RuntimeClass plugin runs again
// after a webhook changes the pod, so a runtime class set here still gets
// its overhead and scheduling from its RuntimeClass (e2e TestRuntime).
func (a *applier) runtime(_ []target) {
	r := a.p.Spec.Runtime
	if r == nil {
		return
	}
	if r.ClassName != "" {
		a.item(func() { a.runtimeClass(r) })
	}
	if len(r.Tolerations) > 0 {
		a.item(func() { a.tolerations(r.Tolerations) })
	}
	for _, k := range slices.Sorted(maps.Keys(r.NodeSelector)) {
		a.item(func() { a.nodeSelector(r, k) })
	}
}

func (a *applier) runtimeClass(r *policy.Runtime) {
	item := "runtimeClass/" + r.ClassName
	if !a.claim("runtimeClass", item) {
		return
	}
	own := a.pod.Spec.RuntimeClassName
	switch {
	case own != nil && *own == r.ClassName:
	case own != nil && r.OnConflict == policy.Keep:
		a.skip(item, fmt.Sprintf("the pod names its own runtimeClassName %q; kept (onConflict: keep)", *own), true)
		return
	default:
		if own != nil {
			a.warn("%s: the pod's own runtimeClassName %q is replaced (onConflict: override)", item, *own)
		}
		a.pod.Spec.RuntimeClassName = new(r.ClassName) // the policy's is shared
		a.st.dirty = true
	}
	a.applied(item)
}

// tolerations adds each of want that the pod does not have.
func (a *applier) tolerations(want []policy.Toleration) {
	for _, t := range want {
		tol := corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect}
		if t.TolerationSeconds != nil {
			tol.TolerationSeconds = new(*t.TolerationSeconds) // the policy's is shared
		}
		if !slices.ContainsFunc(a.pod.Spec.Tolerations, func(o corev1.Toleration) bool { return equality.Semantic.DeepEqual(o, tol) }) {
			a.pod.Spec.Tolerations = append(a.pod.Spec.Tolerations, tol)
			a.st.dirty = true
		}
	}
	a.applied("tolerations")
}

func (a *applier) nodeSelector(r *policy.Runtime, key string) {
	item := "nodeSelector/" + key
	if !a.claim(item, item) {
		return
	}
	want := r.NodeSelector[key]
	own, set := a.pod.Spec.NodeSelector[key]
	switch {
	case set && own == want:
	case set && r.OnConflict == policy.Keep:
		a.skip(item, fmt.Sprintf("the pod selects %s=%q itself; kept (onConflict: keep)", key, own), true)
		return
	default:
		if set {
			a.warn("%s: the pod's own value %q is replaced (onConflict: override)", item, own)
		}
		setIn(&a.pod.Spec.NodeSelector, key, want)
		a.st.dirty = true
	}
	a.applied(item)
}
