package predict

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/sandbox-webhook/sandbox-webhook/internal/kubeversion"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Target is the apiserver a verdict is predicted for: --kube-version and
// the --feature-gates that change what it stores. The mutation is told too:
// memory.level auto and image asset sources follow it.
type Target struct {
	version      string // "1.33", as given; "" when not given
	gates        string // --feature-gates, as given
	PodLevel     mutate.PodLevelResources
	ImageVolumes mutate.ImageVolumes
}

// The gates that change what the apiserver stores of a mutated pod.
const (
	podLevelGate    = "PodLevelResources"
	imageVolumeGate = "ImageVolume"
)

// ParseTarget reads --kube-version (1.NN or v1.NN.P) and --feature-gates
// (PodLevelResources=true|false, ImageVolume=true|false, comma-separated
// like kube-apiserver's).
func ParseTarget(kubeVersion, gates string) (Target, error) {
	t := Target{gates: gates}
	if kubeVersion != "" {
		v, err := utilversion.ParseGeneric(kubeVersion)
		if err != nil || v.Major() != 1 {
			return t, fmt.Errorf("--kube-version %q: want a Kubernetes version such as 1.33 or v1.33.13", kubeVersion)
		}
		// --kube-version outside the minors the e2e version matrix proves is
		// refused rather than predicted from an apiserver nothing tested.
		if v.Minor() < kubeversion.Oldest || v.Minor() > kubeversion.Newest {
			return t, fmt.Errorf("--kube-version %q: the supported minors are 1.%d to 1.%d (the ones the e2e version matrix proves)", kubeVersion, kubeversion.Oldest, kubeversion.Newest)
		}
		t.version = fmt.Sprintf("1.%d", v.Minor())
		t.PodLevel = mutate.PodLevelKept
		if v.Minor() < kubeversion.PodLevelResources {
			t.PodLevel = mutate.PodLevelDropped
		}
		t.ImageVolumes = mutate.ImageVolumesKept
		if v.Minor() < kubeversion.ImageVolumes {
			t.ImageVolumes = mutate.ImageVolumesDropped
		}
	}
	for g := range strings.SplitSeq(gates, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		name, val, ok := strings.Cut(g, "=")
		on, err := strconv.ParseBool(val)
		if !ok || err != nil {
			return t, fmt.Errorf("--feature-gates %q: want NAME=true|false", g)
		}
		switch name {
		case podLevelGate:
			t.PodLevel = mutate.PodLevelDropped
			if on {
				t.PodLevel = mutate.PodLevelKept
			}
		case imageVolumeGate:
			t.ImageVolumes = mutate.ImageVolumesDropped
			if on {
				t.ImageVolumes = mutate.ImageVolumesKept
			}
		default:
			// Other gates are accepted as kube-apiserver takes them; they
			// change nothing these pods store. A misspelling of one that
			// does would silently predict the wrong apiserver.
			if near := policy.Nearest(name, []string{podLevelGate, imageVolumeGate}); near != "" {
				return t, fmt.Errorf("--feature-gates %q: unknown gate %q; did you mean %q?", g, name, near)
			}
		}
	}
	return t, nil
}

// Stored is pod as an apiserver of target t stores it: without pod-level
// resources, or image volumes and their mounts, where it drops them (the
// webhook injects neither there; the pod may have its own). It returns a
// note for each thing that dropped.
func (t Target) Stored(pod *corev1.Pod) (*corev1.Pod, []string) {
	var notes []string
	out := pod
	if t.PodLevel == mutate.PodLevelDropped && pod.Spec.Resources != nil {
		out = pod.DeepCopy()
		out.Spec.Resources = nil
		notes = append(notes, t.name()+" drops pod-level resources without an error: spec.resources is not stored")
	}
	if t.ImageVolumes != mutate.ImageVolumesDropped {
		return out, notes
	}
	var images []string
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			images = append(images, v.Name)
		}
	}
	if len(images) == 0 {
		return out, notes
	}
	if out == pod {
		out = pod.DeepCopy()
	}
	mountsImage := func(m corev1.VolumeMount) bool { return slices.Contains(images, m.Name) }
	out.Spec.Volumes = slices.DeleteFunc(out.Spec.Volumes, func(v corev1.Volume) bool { return v.Image != nil })
	for _, c := range mutate.AllContainers(&out.Spec) {
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, mountsImage)
	}
	notes = append(notes, fmt.Sprintf("%s drops image volumes without an error: volumes %s and their mounts are not stored", t.name(), strings.Join(images, ", ")))
	return out, notes
}

func (t Target) name() string {
	if t.version == "" {
		return "the apiserver (" + t.gates + ")"
	}
	return "Kubernetes " + t.version
}
