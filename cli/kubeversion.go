package cli

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// podLevelDefaultMinor is the first Kubernetes minor whose apiserver keeps
// pod-level resources by default (PodLevelResources beta, on, in 1.34).
const podLevelDefaultMinor = 34

// kubeTarget is the apiserver dry-run predicts for: --kube-version and the
// --feature-gates that change what it stores.
type kubeTarget struct {
	version  string // "1.33", as given; "" when not given
	podLevel mutate.PodLevelResources
}

// parseKubeTarget reads --kube-version (1.NN or v1.NN.P) and --feature-gates
// (PodLevelResources=true|false, comma-separated like kube-apiserver's).
func parseKubeTarget(kubeVersion, gates string) (kubeTarget, error) {
	var t kubeTarget
	if kubeVersion != "" {
		v, err := utilversion.ParseGeneric(kubeVersion)
		if err != nil || v.Major() != 1 {
			return t, usageErrorf("--kube-version %q: want a Kubernetes version such as 1.33 or v1.33.13", kubeVersion)
		}
		t.version = fmt.Sprintf("1.%d", v.Minor())
		t.podLevel = mutate.PodLevelKept
		if v.Minor() < podLevelDefaultMinor {
			t.podLevel = mutate.PodLevelDropped
		}
	}
	for g := range strings.SplitSeq(gates, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		name, val, ok := strings.Cut(g, "=")
		on, err := strconv.ParseBool(val)
		if !ok || err != nil {
			return t, usageErrorf("--feature-gates %q: want NAME=true|false", g)
		}
		if name != "PodLevelResources" {
			continue // accepted as kube-apiserver takes them; no effect on what these pods store
		}
		t.podLevel = mutate.PodLevelDropped
		if on {
			t.podLevel = mutate.PodLevelKept
		}
	}
	return t, nil
}

// storedPod is pod as an apiserver of target t stores it: without pod-level
// resources where it drops them. It reports whether that dropped anything.
func (t kubeTarget) storedPod(pod *corev1.Pod) (*corev1.Pod, bool) {
	if t.podLevel != mutate.PodLevelDropped || pod.Spec.Resources == nil {
		return pod, false
	}
	out := pod.DeepCopy()
	out.Spec.Resources = nil
	return out, true
}

func (t kubeTarget) name() string {
	if t.version == "" {
		return "the apiserver (PodLevelResources=false)"
	}
	return "Kubernetes " + t.version
}
