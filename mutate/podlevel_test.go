package mutate_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func levelPolicy(level string) string {
	return `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: m
spec:
  match:
    podSelector:
      matchLabels:
        app: sandbox
  memory:
    limit: 8Gi
    request: 1Gi
    level: ` + level
}

// auto is pod where pod-level resources are kept (or not known) and
// container where they are dropped; pod where they are dropped injects
// nothing and warns.
func TestMemoryLevelAgainstCluster(t *testing.T) {
	ns := mutate.Namespace{Name: "sandboxes"}
	run := func(level string, pl mutate.PodLevelResources) mutate.Result {
		return mutate.Pod(testkit.SandboxPod("", "p"), ns, parseSet(t, levelPolicy(level)), mutate.Options{PodLevelResources: pl})
	}
	resources := func(p *corev1.Pod) (*corev1.ResourceRequirements, corev1.ResourceRequirements) {
		return p.Spec.Resources, p.Spec.Containers[0].Resources
	}
	for _, pl := range []mutate.PodLevelResources{mutate.PodLevelUnknown, mutate.PodLevelKept} {
		autoPod, podPod := run("auto", pl).Pod, run("pod", pl).Pod
		a1, a2 := resources(autoPod)
		p1, p2 := resources(podPod)
		if a1 == nil || !cmp.Equal(a1, p1) || !cmp.Equal(a2, p2) {
			t.Errorf("%q: auto gives %v %v, pod gives %v %v; want the same pod-level resources", pl, a1, a2, p1, p2)
		}
	}
	autoRes, ctrRes := run("auto", mutate.PodLevelDropped), run("container", mutate.PodLevelDropped)
	a1, a2 := resources(autoRes.Pod)
	c1, c2 := resources(ctrRes.Pod)
	if a1 != nil || c1 != nil || !cmp.Equal(a2, c2) || a2.Limits.Memory().String() != "8Gi" {
		t.Errorf("dropped: auto gives %v %v, container gives %v %v; want the same container-level 8Gi", a1, a2, c1, c2)
	}
	if len(autoRes.Warnings) != 0 {
		t.Errorf("auto warned %q", autoRes.Warnings)
	}

	res := run("pod", mutate.PodLevelDropped)
	if res.Pod.Spec.Resources != nil || res.Pod.Spec.Containers[0].Resources.Limits != nil {
		t.Errorf("pod level on a cluster that drops it set %v / %v", res.Pod.Spec.Resources, res.Pod.Spec.Containers[0].Resources)
	}
	want := []mutate.Decision{{Policy: "m", Item: "memory/pod", Reason: mutate.PodLevelDroppedReason}}
	if diff := cmp.Diff(want, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "drops pod-level resources") {
		t.Errorf("warnings %q; want one saying pod-level resources are dropped", res.Warnings)
	}
	if !strings.Contains(res.Pod.Annotations[mutate.StatusAnnotation], `"skipped":["memory/pod: this apiserver drops`) {
		t.Errorf("status annotation %s", res.Pod.Annotations[mutate.StatusAnnotation])
	}
}
