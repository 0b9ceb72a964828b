package mutate_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestStatusAlways: with StatusAlways every pod leaves with the status
// annotation, an empty one ({"policies":[]}) where no policy changes it
// (not selected, opted out, only a shadow policy, a skipped Windows pod),
// the usual one where a policy does, which is then the same as without the
// option; a second pass changes nothing; and without the option a pod no
// policy changes is left as it came.
func TestStatusAlways(t *testing.T) {
	const empty = `{"policies":[]}`
	enforce := parseSet(t, header+"metadata: {name: p}\nspec:\n  match: {podSelector: {matchLabels: {app: sandbox}}, optOut: {label: skip}}\n  env: [{name: UV_LINK_MODE, value: copy}]\n")
	shadow := parseSet(t, header+"metadata: {name: p}\nspec:\n  enforcement: shadow\n  match: {podSelector: {matchLabels: {app: sandbox}}}\n  env: [{name: UV_LINK_MODE, value: copy}]\n")
	ns := mutate.Namespace{Name: "sandboxes"}
	cases := []struct {
		name   string
		edit   func(*corev1.Pod)
		shadow bool
		want   string // the annotation with StatusAlways; "" for the usual one
	}{
		{name: "selected"},
		{name: "not selected", edit: func(p *corev1.Pod) { p.Labels = nil }, want: empty},
		{name: "opted out", edit: func(p *corev1.Pod) { p.Labels["skip"] = "true" }, want: empty},
		{name: "only a shadow policy", shadow: true, want: empty},
		{name: "windows", edit: func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }, want: empty},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := enforce
			if c.shadow {
				set = shadow
			}
			pod := testkit.SandboxPod("", "p")
			if c.edit != nil {
				c.edit(pod)
			}
			without := mutate.Pod(pod, ns, set, mutate.Options{})
			with := mutate.Pod(pod, ns, set, mutate.Options{StatusAlways: true})
			if !with.Changed {
				t.Fatal("StatusAlways: the pod is reported unchanged")
			}
			if with.OnlyStatus != (c.want != "") {
				t.Errorf("OnlyStatus = %v", with.OnlyStatus)
			}
			want := c.want
			if want == "" {
				want = without.Pod.Annotations[mutate.StatusAnnotation]
				if want == "" {
					t.Fatal("a selected pod has no status annotation without StatusAlways")
				}
				if diff := cmp.Diff(without.Pod, with.Pod); diff != "" {
					t.Errorf("a selected pod differs with StatusAlways (-without +with):\n%s", diff)
				}
			} else if without.Changed || without.Pod.Annotations[mutate.StatusAnnotation] != "" {
				t.Errorf("without StatusAlways the pod changed: %v", without.Pod.Annotations)
			}
			if got := with.Pod.Annotations[mutate.StatusAnnotation]; got != want {
				t.Errorf("status annotation %q, want %q", got, want)
			}
			if pod.Annotations != nil {
				t.Errorf("the input pod was modified: %v", pod.Annotations)
			}
			second := mutate.Pod(with.Pod, ns, set, mutate.Options{StatusAlways: true})
			if second.Changed {
				t.Errorf("a second pass changed the pod: %v", second.Pod.Annotations)
			}
		})
	}
}
