package mutate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
)

// assets injects the policy's read-only data: a hostPath or an image
// volume each, by the namespace's Pod Security level.
func (a *applier) assets(sel []target) {
	for i := range a.p.Spec.Assets {
		a.item(func() { a.asset(i, sel) })
	}
}

func (a *applier) asset(i int, sel []target) {
	as := a.p.Spec.Assets[i]
	level := a.ns.Labels[psaapi.EnforceLevelLabel]
	forbidsHostPath := level == "baseline" || level == "restricted"
	// The pod's runtime refuses hostPath, as the policy says: the image.
	rc := a.pod.Spec.RuntimeClassName
	underRuntime := rc != nil && slices.Contains(as.ImageForRuntimeClasses, *rc)

	var src corev1.VolumeSource
	item := "asset/" + as.Name
	if as.HostPath != nil && (!forbidsHostPath || as.Image == nil) && !underRuntime {
		t := corev1.HostPathType(as.HostPath.Type)
		src.HostPath = &corev1.HostPathVolumeSource{Path: as.HostPath.Path, Type: &t}
		item += ":hostPath"
		if forbidsHostPath {
			a.warn("the pod will be rejected: namespace %q enforces Pod Security %q, which forbids hostPath asset %q; "+
				"give the asset an image source or use a privileged namespace", a.ns.Name, level, as.Name)
		}
	} else {
		src.Image = &corev1.ImageVolumeSource{
			Reference:  a.mirrored(as.Image.Reference),
			PullPolicy: corev1.PullPolicy(as.Image.PullPolicy),
		}
		item += ":image"
	}
	a.volume(item, corev1.Volume{Name: as.Name, VolumeSource: src}, as.MountPath, true, sel)
}

// ImageVolumeDroppedReason is why an asset that would get its image source
// is not injected on an apiserver that drops image volumes; the client sees
// it as a warning.
// It is kept short so that a warning naming a policy of up to 63 characters
// and the asset stays within the apiserver's 256 runes (see clientWarnings),
// fix included (TestClusterDropWarningsFit).
const ImageVolumeDroppedReason = "this apiserver drops image volumes (Kubernetes before 1.35, or ImageVolume gate off): " +
	"not mounted; use hostPath in a privileged namespace"
