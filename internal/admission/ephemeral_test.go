package admission

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestEphemeralContainers: an update of pods/ephemeralcontainers that adds a
// container mounting a hostPath volume of the pod other than read-only, whole
// and without propagation is denied;
// every other such update is allowed unpatched. The pod's annotations play no
// part.
func TestEphemeralContainers(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	hostToContainer := corev1.MountPropagationHostToContainer
	none := corev1.MountPropagationNone

	running := func() *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: "sandboxes"},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "python:3.12"}},
				Volumes: []corev1.Volume{
					{Name: "rebench-v2", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/shared/swe-rebench-v2"}}},
					{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
		}
	}
	withDebug := func(p *corev1.Pod, name string, m ...corev1.VolumeMount) *corev1.Pod {
		p = p.DeepCopy()
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox", VolumeMounts: m},
		})
		return p
	}
	whole := corev1.VolumeMount{Name: "rebench-v2", MountPath: "/data", ReadOnly: true}
	mount := func(change func(m *corev1.VolumeMount)) corev1.VolumeMount {
		m := whole
		change(&m)
		return m
	}

	for _, tc := range []struct {
		name     string
		old, pod *corev1.Pod
		denied   string // substring of the reason; "" for allowed
	}{
		{name: "writable", old: running(), pod: withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.ReadOnly = false })),
			denied: `ephemeral container "debugger" mounts hostPath volume "rebench-v2" not readOnly`},
		{name: "through a subPath", old: running(), pod: withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.SubPath = "x" })),
			denied: "with a subPath"},
		{name: "through a subPathExpr", old: running(), pod: withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.SubPathExpr = "$(HOME)" })),
			denied: "with a subPathExpr"},
		{name: "with propagation", old: running(), pod: withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.MountPropagation = &hostToContainer })),
			denied: "with mountPropagation HostToContainer"},
		{name: "a hostPath only the request's pod declares", old: nil, pod: withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.ReadOnly = false })),
			denied: "not readOnly"},
		{name: "a hostPath only the stored pod declares", old: running(), pod: func() *corev1.Pod {
			p := withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.ReadOnly = false }))
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
			return p
		}(), denied: "not readOnly"},
		{name: "a second container added beside an allowed one", old: withDebug(running(), "first", whole),
			pod:    withDebug(withDebug(running(), "first", whole), "second", mount(func(m *corev1.VolumeMount) { m.ReadOnly = false })),
			denied: `spec.ephemeralContainers[1].volumeMounts[0]: ephemeral container "second"`},
		{name: "read-only and whole", old: running(), pod: withDebug(running(), "debugger", whole)},
		{name: "read-only with propagation None", old: running(), pod: withDebug(running(), "debugger", mount(func(m *corev1.VolumeMount) { m.MountPropagation = &none }))},
		{name: "no mounts", old: running(), pod: withDebug(running(), "debugger")},
		{name: "a writable emptyDir", old: running(), pod: withDebug(running(), "debugger", corev1.VolumeMount{Name: "scratch", MountPath: "/scratch"})},
		{name: "an existing container is not judged again", old: withDebug(running(), "old", mount(func(m *corev1.VolumeMount) { m.ReadOnly = false })),
			pod: withDebug(withDebug(running(), "old", mount(func(m *corev1.VolumeMount) { m.ReadOnly = false })), "new", whole)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(admissionv1.Update, "sandboxes", toJSON(t, tc.pod))
			req.SubResource = "ephemeralcontainers"
			if tc.old != nil {
				req.OldObject = runtime.RawExtension{Raw: toJSON(t, tc.old)}
			}
			resp := f.admit(t, req)
			if len(resp.Patch) != 0 {
				t.Errorf("patched %s, want no patch", resp.Patch)
			}
			if tc.denied == "" {
				if !resp.Allowed {
					t.Errorf("denied (%v), want allowed", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, tc.denied) {
				t.Errorf("allowed=%v result %+v, want denied with code 403 and %q", resp.Allowed, resp.Result, tc.denied)
			}
		})
	}
}

func toJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
