package mutate

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// injected reports whether the pod's volume of vol's name is vol, which
// this policy wants: not the pod's own volume of that name. The volume
// this pass injected is vol itself, which reflect.DeepEqual finds at once
// (its source is the same pointer); the semantic comparison, which also
// takes 1024Mi for 1Gi, is for a volume the pod came with.
func (a *applier) injected(vol corev1.Volume) bool {
	i := slices.IndexFunc(a.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol.Name })
	return i >= 0 && (reflect.DeepEqual(a.pod.Spec.Volumes[i], vol) || apiequality.Semantic.DeepEqual(a.pod.Spec.Volumes[i], vol))
}

// volume adds want to the pod, unless the pod or an earlier policy already
// has a different volume of that name, and mounts it at mountPath in every
// selected container that does not already mount something there.
func (a *applier) volume(item string, want corev1.Volume, mountPath string, readOnly bool, sel []target) {
	// A volume name or mount path belongs to the first policy (in order)
	// that declares it, whether or not that policy could inject it: the
	// outcome then depends only on the policies, never on what an earlier
	// pass injected, so a second pass reaches the same decisions.
	for _, key := range []string{"volume/" + want.Name, "path/" + mountPath} {
		if owner, ok := a.claims[key]; ok {
			a.skip(item, fmt.Sprintf("%s is claimed by policy %q, which applies first", key, owner), true)
			return
		}
	}
	a.claims["volume/"+want.Name] = a.p.Name()
	a.claims["path/"+mountPath] = a.p.Name()
	var existing *corev1.Volume
	for i := range a.pod.Spec.Volumes {
		if a.pod.Spec.Volumes[i].Name == want.Name {
			existing = &a.pod.Spec.Volumes[i]
			break
		}
	}
	if existing != nil && !apiequality.Semantic.DeepEqual(*existing, want) {
		a.skip(item, fmt.Sprintf("the pod already has a volume named %q; the pod's own is kept", want.Name), true)
		return
	}
	// The injected volume is mounted only as the policy says. A mount of
	// it the pod wrote another way (elsewhere, writable, a subPath, mount
	// propagation, a device), in a container of any kind, would otherwise
	// resolve to the policy's volume once injected: the policy's host path,
	// writable where the pod chose. Nothing is injected then: a pod that
	// does not declare the volume is rejected by the apiserver for mounting
	// a volume it lacks, exactly as without the webhook, and one that has
	// the host path volume already is refused. The status annotation plays
	// no part, so forging it changes nothing.
	if foreign := findForeign(a.pod, want.Name, mountPath, readOnly); foreign != nil {
		a.foreign(item, want, existing != nil, foreign, mountPath, readOnly)
		return
	}
	if len(sel) == 0 {
		a.skip(item, "no container is selected", false)
		return
	}
	dropped := want.Image != nil && a.imgVol == ImageVolumesDropped
	mounted := 0
	for _, t := range sel {
		if m, at := mountNear(t.c, mountPath); m != nil {
			switch {
			case at && m.Name == want.Name:
				mounted++ // findForeign has checked it is the policy's mount
			case at:
				a.skip(fmt.Sprintf("%s[%s]", item, t.c.Name),
					fmt.Sprintf("container %q already mounts volume %q at %s; kept", t.c.Name, m.Name, mountPath), true)
			default:
				a.skip(fmt.Sprintf("%s[%s]", item, t.c.Name),
					fmt.Sprintf("container %q already mounts volume %q under or above %s; kept", t.c.Name, m.Name, mountPath), true)
			}
			continue
		}
		if !dropped {
			t.c.VolumeMounts = append(t.c.VolumeMounts, corev1.VolumeMount{Name: want.Name, MountPath: mountPath, ReadOnly: readOnly})
			a.st.dirty = true
		}
		mounted++
	}
	if mounted == 0 {
		a.skip(item, "every selected container already mounts something at "+mountPath, false)
		return
	}
	if dropped {
		// The apiserver would drop the volume and every mount of it
		// without an error: the pod would run without the asset while the
		// status said it was injected. Nothing is injected, and the pod's
		// own mounts of the volume it does not declare (which the webhook
		// would have declared) go as the apiserver would drop them: the
		// stored pod is the one stored before, apart from the status.
		if existing == nil {
			a.unmount(want.Name)
		}
		a.skip(item, ImageVolumeDroppedReason, true)
		return
	}
	if existing == nil {
		a.pod.Spec.Volumes = append(a.pod.Spec.Volumes, want)
		a.st.dirty = true
	}
	a.applied(item)
}

// foreign decides an item whose volume a container of the pod refers to
// other than the policy's mount does (see findForeign); present says the
// pod has the volume already.
func (a *applier) foreign(item string, want corev1.Volume, present bool, foreign *foreignRef, mountPath string, readOnly bool) {
	how := "at " + mountPath
	if readOnly {
		how = "read-only " + how
	}
	switch {
	case !present:
		a.skip(item, fmt.Sprintf("the pod mounts volume %q other than %s, whole and without propagation; "+
			"not injected; the apiserver rejects the mount of an undeclared volume", want.Name, how), true)
	case want.HostPath != nil:
		// The pod already has the host path volume: an earlier pass
		// injected it and another webhook then added a container, or the
		// pod declared it itself. The foreign mount reaches the host path
		// whatever is injected now, and dropping the volume would take it
		// from the containers that mount it as the policy says too. The
		// pod is refused.
		a.deny(item, fmt.Sprintf("%s %q mounts hostPath volume %q %s; the policy mounts host path %q only %s, whole and without propagation, "+
			"and the pod would run with it mounted otherwise", foreign.kind, foreign.container, want.Name, foreign.how(), want.HostPath.Path, how))
	default:
		// An emptyDir or image volume the pod has: the foreign mount
		// reaches it whatever is injected now, and it is no host path.
		a.skip(item, fmt.Sprintf("the pod mounts volume %q other than %s, whole and without propagation; "+
			"nothing more is mounted", want.Name, how), true)
	}
}

// unmount removes every mount of the volume named name from the init and
// app containers, as an apiserver that drops image volumes removes the
// mounts of the image volumes it drops. (A pod is created without
// ephemeral containers.)
func (a *applier) unmount(name string) {
	isName := func(m corev1.VolumeMount) bool { return m.Name == name }
	for c := range PodContainers(&a.pod.Spec) {
		if ms := &c.VolumeMounts; slices.ContainsFunc(*ms, isName) {
			if *ms = slices.DeleteFunc(slices.Clone(*ms), isName); len(*ms) == 0 {
				*ms = nil // as the pod would be without them: no empty list
			}
			a.st.dirty = true
		}
	}
}

// policyMount reports whether m is the mount the policy makes of the
// volume named name: at mountPath (spelled exactly so), read-only when
// readOnly, whole (no subPath or subPathExpr) and without mount propagation.
func policyMount(m *corev1.VolumeMount, name, mountPath string, readOnly bool) bool {
	return m.Name == name && m.MountPath == mountPath && (!readOnly || m.ReadOnly) &&
		m.SubPath == "" && m.SubPathExpr == "" &&
		(m.MountPropagation == nil || *m.MountPropagation == corev1.MountPropagationNone)
}

// foreignRef is the first reference of a container of the pod, of any kind,
// to the volume named name other than the mount the policy makes (see
// policyMount), including its use as a block device.
type foreignRef struct {
	kind, container string
	mount           *corev1.VolumeMount // nil for a device
}

func findForeign(pod *corev1.Pod, name, mountPath string, readOnly bool) *foreignRef {
	for ref, c := range AllContainers(&pod.Spec) {
		for i := range c.VolumeMounts {
			if m := &c.VolumeMounts[i]; m.Name == name && !policyMount(m, name, mountPath, readOnly) {
				return &foreignRef{kind: ref.Kind(), container: c.Name, mount: m}
			}
		}
		if slices.ContainsFunc(c.VolumeDevices, func(d corev1.VolumeDevice) bool { return d.Name == name }) {
			return &foreignRef{kind: ref.Kind(), container: c.Name}
		}
	}
	return nil
}

// how says how it refers to the volume: writable at "/data", with a
// subPath, as a block device.
func (r *foreignRef) how() string {
	m := r.mount
	if m == nil {
		return "as a block device"
	}
	var out []string
	if !m.ReadOnly {
		out = append(out, "writable")
	}
	out = append(out, fmt.Sprintf("at %q", m.MountPath))
	return strings.Join(append(out, PartialMount(m)...), " ")
}

// PartialMount lists what makes m other than a mount of the whole volume
// without propagation: a subPath, a subPathExpr, a mountPropagation other
// than None.
func PartialMount(m *corev1.VolumeMount) (out []string) {
	if m.SubPath != "" {
		out = append(out, "with a subPath")
	}
	if m.SubPathExpr != "" {
		out = append(out, "with a subPathExpr")
	}
	if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
		out = append(out, "with mountPropagation "+string(*m.MountPropagation))
	}
	return out
}

// mountNear returns the container's mount at mountPath (at is true), else
// its first mount under or above mountPath, which would hide part of the
// injected mount or be hidden by it. Paths are compared as normMountPath
// reads them, so /root/.cache/uv/ and /root//.cache/uv are /root/.cache/uv;
// a path with a ".." component is taken as near any path.
func mountNear(c *corev1.Container, mountPath string) (m *corev1.VolumeMount, at bool) {
	var near *corev1.VolumeMount
	for i := range c.VolumeMounts {
		p, ok := normMountPath(c.VolumeMounts[i].MountPath)
		switch {
		case ok && p == mountPath:
			return &c.VolumeMounts[i], true
		case near != nil:
		case !ok || p == "/" || strings.HasPrefix(p, mountPath+"/") || strings.HasPrefix(mountPath, p+"/"):
			near = &c.VolumeMounts[i]
		}
	}
	return near, false
}

// normMountPath is a mount path without empty and "." components, made
// absolute: the directory the container runtime mounts at. ok is false when
// a component is "..", which this does not resolve. The MAP export computes
// the same in CEL.
func normMountPath(p string) (norm string, ok bool) {
	clean := strings.HasPrefix(p, "/") && (p == "/" || !strings.HasSuffix(p, "/")) &&
		!strings.Contains(p, "//") && !strings.Contains(p, "/./") && !strings.HasSuffix(p, "/.") &&
		!strings.Contains(p, "..")
	if clean {
		return p, true
	}
	var parts []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			return "", false
		default:
			parts = append(parts, s)
		}
	}
	return "/" + strings.Join(parts, "/"), true
}
