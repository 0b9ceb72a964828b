package mutate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// applier applies one matching policy to a pod.
type applier struct {
	p      *policy.Policy
	mode   policy.Mode
	ns     Namespace
	prev   *status // the status annotation of an earlier pass, if any
	res    *Result
	shadow bool
	podLvl PodLevelResources
	imgVol ImageVolumes

	pod    *corev1.Pod
	claims map[string]string // "volume/x", "path/y", "env/z", "memory", "convert/x" → policy
	st     *status
	sp     *statusPolicy // also in st.Policies; convert adds to it later
}

// target is a container the policy selected.
type target struct {
	c    *corev1.Container
	init bool
}

func (a *applier) apply() {
	a.sp = &statusPolicy{Name: a.p.Name(), Hash: a.p.Hash, Mode: a.mode}
	sel := a.containers()
	// Each item starts clean, so that applied can tell an item the pod
	// already had from one that changed it; dirty collects them all.
	dirty := a.st.dirty
	for i := range a.p.Spec.Caches {
		a.st.dirty = false
		a.cache(i, sel)
		dirty = dirty || a.st.dirty
	}
	if a.raises() {
		for _, t := range sel {
			a.st.dirty = false
			a.raiseLimit(t)
			dirty = dirty || a.st.dirty
		}
	}
	for i := range a.p.Spec.Assets {
		a.st.dirty = false
		a.asset(i, sel)
		dirty = dirty || a.st.dirty
	}
	for _, e := range a.p.Spec.Env {
		a.st.dirty = false
		a.env(e, sel)
		dirty = dirty || a.st.dirty
	}
	if a.p.Spec.Memory != nil {
		a.st.dirty = false
		a.memory(sel)
		dirty = dirty || a.st.dirty
	}
	a.st.dirty = dirty
	a.st.Policies = append(a.st.Policies, a.sp)
}

// containers returns the containers the policy's container selector picks,
// init containers (and native sidecars) first, in pod order.
func (a *applier) containers() []target {
	cs := a.p.Spec.Containers
	picked := func(name string) bool {
		return firstGlob(cs.Include, name) != "" && firstGlob(cs.Exclude, name) == ""
	}
	var out []target
	if cs.InitContainers == nil || *cs.InitContainers {
		for i := range a.pod.Spec.InitContainers {
			if c := &a.pod.Spec.InitContainers[i]; picked(c.Name) {
				out = append(out, target{c: c, init: true})
			}
		}
	}
	for i := range a.pod.Spec.Containers {
		if c := &a.pod.Spec.Containers[i]; picked(c.Name) {
			out = append(out, target{c: c})
		}
	}
	return out
}

func (a *applier) cache(i int, sel []target) {
	c := a.p.Spec.Caches[i]
	want := a.cacheVolume(i)
	a.volume("cache/"+c.Name, want, c.MountPath, false, sel)
	if a.mode == policy.ModeMemory && !a.raises() {
		a.warnCharged(want, c.MountPath, sel)
	}
}

// raises reports whether the policy raises container limits by its caches:
// containerLimits raise, in memory mode (on disk a cache is reclaimable page
// cache, charged as before the webhook).
func (a *applier) raises() bool {
	return a.mode == policy.ModeMemory && a.p.Spec.ContainerLimits == policy.RaiseLimits
}

// injected reports whether the pod's volume of vol's name is vol, which
// this policy wants: not the pod's own volume of that name.
func (a *applier) injected(vol corev1.Volume) bool {
	i := slices.IndexFunc(a.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol.Name })
	return i >= 0 && apiequality.Semantic.DeepEqual(a.pod.Spec.Volumes[i], vol)
}

// ownLimit returns the memory limit the pod gives container t, if any: a
// limit equal to the headroom this policy sets per container (its
// memory.level container) is the headroom, not a limit of the pod's own.
func (a *applier) ownLimit(t target) (resource.Quantity, bool) {
	lim, ok := t.c.Resources.Limits[corev1.ResourceMemory]
	headroom := a.p.Spec.Memory != nil && (a.p.Spec.Memory.Level == policy.LevelContainer ||
		a.p.Spec.Memory.Level == policy.LevelAuto && a.podLvl == PodLevelDropped)
	if !ok || headroom && lim.Cmp(a.p.MemoryLimit) == 0 {
		return resource.Quantity{}, false
	}
	return lim, true
}

// cacheVolume is the volume the policy's i-th cache is in this mode.
func (a *applier) cacheVolume(i int) corev1.Volume {
	ed := &corev1.EmptyDirVolumeSource{SizeLimit: a.p.CacheSizes[i]}
	if a.mode == policy.ModeMemory {
		ed.Medium = corev1.StorageMediumMemory
	}
	return corev1.Volume{Name: a.p.Spec.Caches[i].Name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}}
}

// raisedBefore returns what the named container's memory limit was before
// an earlier pass raised it to lim, and that pass's record; nil when the
// record is not believed. The status annotation is the pod author's to
// write: a record is believed only for a container this policy selects
// (t), and only when it is exactly what this policy would have written
// there, its limit lim being what it was raised from plus add, the
// in-memory caches of this policy that t mounts. A believed record is one
// status.restoreLimits may restore.
func (a *applier) raisedBefore(t target, lim, add resource.Quantity) (resource.Quantity, *raisedLimit) {
	pr := a.prev.raised(t.c.Name)
	if pr == nil || add.IsZero() || !quantityIs(lim, pr.To) {
		return resource.Quantity{}, nil
	}
	q, ok := parseBounded(pr.From)
	if !ok {
		return resource.Quantity{}, nil
	}
	sum := q.DeepCopy()
	sum.Add(add)
	if sum.Cmp(lim) != 0 {
		return resource.Quantity{}, nil
	}
	if !slices.Contains(a.st.restorable, pr) {
		a.st.restorable = append(a.st.restorable, pr)
	}
	return q, pr
}

// cacheAdd is the sum of the sizeLimits of the policy's caches, as this
// mode injects them, that container t mounts as the policy mounts them:
// what they raise its limit by (containerLimits: raise).
func (a *applier) cacheAdd(t target) resource.Quantity {
	var add resource.Quantity
	for i, c := range a.p.Spec.Caches {
		vol := a.cacheVolume(i)
		if size := a.p.CacheSizes[i]; size != nil && a.injected(vol) &&
			slices.ContainsFunc(t.c.VolumeMounts, func(m corev1.VolumeMount) bool { return policyMount(&m, c.Name, c.MountPath, false) }) {
			add.Add(*size) // validation: with containerLimits raise, every cache has a sizeLimit
		}
	}
	return add
}

// raiseLimit raises container t's own memory limit by the sizeLimits of the
// policy's in-memory caches it mounts (containerLimits: raise), and its
// request with it when the two were equal. A limit an earlier pass raised is
// recomputed from what it was, so a second pass changes nothing; one that a
// pod-level limit the pod author set could not hold is kept, with a warning.
func (a *applier) raiseLimit(t target) {
	lim, ok := a.ownLimit(t)
	if !ok || findContainer(&a.pod.Spec, t.c.Name) != t.c {
		return // no limit of its own, or a name the apiserver refuses twice
	}
	add := a.cacheAdd(t)
	if add.IsZero() {
		return
	}
	item := "limits/" + t.c.Name
	req, hasReq := t.c.Resources.Requests[corev1.ResourceMemory]
	// What the limit was before any raise: as it is, unless a policy of
	// this pass or an earlier pass raised it. A request the pod does not
	// set is the limit: the apiserver defaults it so before admission, and
	// will default it to the raised limit in dry-run's pod.
	rec := a.st.raised(t.c.Name)
	from, withReq := lim, !hasReq || req.Cmp(lim) == 0
	if rec == nil {
		if q, pr := a.raisedBefore(t, lim, add); pr != nil {
			from, withReq = q, pr.Request && (!hasReq || quantityIs(req, pr.To))
		}
	} else {
		withReq = rec.Request && withReq
	}
	to := lim.DeepCopy()
	if rec == nil {
		to = from.DeepCopy()
	}
	to.Add(add)
	if r := a.pod.Spec.Resources; r != nil {
		if pl, ok := r.Limits[corev1.ResourceMemory]; ok && to.Cmp(pl) > 0 && (a.prevMemory() == nil || !quantityIs(pl, a.prevMemory().Limit)) {
			a.skip(item, fmt.Sprintf("not raised: the pod-level memory limit (%s) is below the raised limit (%s); %s", pl.String(), to.String(),
				"the in-memory caches count against the container's limit"), true)
			return
		}
	}
	if lim.Cmp(to) != 0 || withReq && hasReq && req.Cmp(to) != 0 {
		t.c.Resources.Limits[corev1.ResourceMemory] = to
		if withReq && hasReq {
			t.c.Resources.Requests[corev1.ResourceMemory] = to.DeepCopy()
		}
		a.st.dirty = true
	}
	if rec == nil {
		rec = &raisedLimit{Container: t.c.Name, From: from.String(), Request: withReq}
		a.st.RaisedLimits = append(a.st.RaisedLimits, rec)
	}
	rec.To = to.String()
	a.applied(item)
}

// warnCharged warns about every selected container with a memory limit of
// its own that mounts the memory-backed cache vol: tmpfs pages are charged
// to the memory cgroup of the container that writes them, and stay there
// (no swap), so the cache takes up to its sizeLimit from that limit, which
// the pod-level headroom does not raise. A workload that fitted with its
// cache on disk, in reclaimable page cache, can be OOM-killed with it in
// memory. A limit equal to the headroom this policy sets per container (its
// memory.level container) is the headroom, not a limit of the pod's own.
func (a *applier) warnCharged(vol corev1.Volume, mountPath string, sel []target) {
	if !a.injected(vol) {
		return // not injected, or the pod's own volume of that name
	}
	for _, t := range sel {
		lim, ok := a.ownLimit(t)
		if !ok || !slices.ContainsFunc(t.c.VolumeMounts, func(m corev1.VolumeMount) bool { return policyMount(&m, vol.Name, mountPath, false) }) {
			continue
		}
		// A limit an earlier pass raised goes back to what it was at the
		// end of this one (status.restoreLimits).
		if a.prev.raised(t.c.Name) != nil {
			if q, pr := a.raisedBefore(t, lim, a.cacheAdd(t)); pr != nil {
				lim = q
			}
		}
		a.warn("%s", chargedWarning(vol.Name, t.c.Name, lim, vol.EmptyDir.SizeLimit))
	}
}

// chargedWarning says that the memory-backed cache named cache, of at most
// size (nil: no sizeLimit), counts against the memory limit lim of the
// container named container, and what it leaves the container's processes.
func chargedWarning(cache, container string, lim resource.Quantity, size *resource.Quantity) string {
	msg := fmt.Sprintf("cache/%s: container %q limits its memory to %s, and this in-memory cache counts against it", cache, container, lim.String())
	switch {
	case size == nil:
		return msg + " with no sizeLimit: it can take the whole limit (OOM kill)"
	case size.Cmp(lim) >= 0:
		return msg + fmt.Sprintf(": up to %s, the whole limit (OOM kill)", size.String())
	}
	left := lim.DeepCopy()
	left.Sub(*size)
	return msg + fmt.Sprintf(": up to %s, leaving %s to its processes before an OOM kill", size.String(), left.String())
}

func (a *applier) asset(i int, sel []target) {
	as := a.p.Spec.Assets[i]
	level := a.ns.Labels[psaapi.EnforceLevelLabel]
	forbidsHostPath := level == "baseline" || level == "restricted"

	var src corev1.VolumeSource
	item := "asset/" + as.Name
	if as.HostPath != nil && (!forbidsHostPath || as.Image == nil) {
		t := corev1.HostPathType(as.HostPath.Type)
		src.HostPath = &corev1.HostPathVolumeSource{Path: as.HostPath.Path, Type: &t}
		item += ":hostPath"
		if forbidsHostPath {
			a.warn("the pod will be rejected: namespace %q enforces Pod Security %q, which forbids hostPath asset %q; "+
				"give the asset an image source or use a privileged namespace", a.ns.Name, level, as.Name)
		}
	} else {
		src.Image = &corev1.ImageVolumeSource{
			Reference:  as.Image.Reference,
			PullPolicy: corev1.PullPolicy(as.Image.PullPolicy),
		}
		item += ":image"
	}
	a.volume(item, corev1.Volume{Name: as.Name, VolumeSource: src}, as.MountPath, true, sel)
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
	for _, cs := range [][]corev1.Container{a.pod.Spec.InitContainers, a.pod.Spec.Containers} {
		for i := range cs {
			if ms := &cs[i].VolumeMounts; slices.ContainsFunc(*ms, isName) {
				if *ms = slices.DeleteFunc(slices.Clone(*ms), isName); len(*ms) == 0 {
					*ms = nil // as the pod would be without them: no empty list
				}
				a.st.dirty = true
			}
		}
	}
}

// ImageVolumeDroppedReason is why an asset that would get its image source
// is not injected on an apiserver that drops image volumes; the client sees
// it as a warning.
// It is kept short so that a warning naming a policy of up to 63 characters
// and the asset stays within the apiserver's 256 runes (see clientWarnings),
// fix included (TestClusterDropWarningsFit).
const ImageVolumeDroppedReason = "this apiserver drops image volumes (Kubernetes before 1.35, or ImageVolume gate off): " +
	"not mounted; use hostPath in a privileged namespace"

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

func findForeign(pod *corev1.Pod, name, mountPath string, readOnly bool) (found *foreignRef) {
	eachContainer(&pod.Spec, func(kind, container string, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) bool {
		for i := range mounts {
			if m := &mounts[i]; m.Name == name && !policyMount(m, name, mountPath, readOnly) {
				found = &foreignRef{kind: kind, container: container, mount: m}
				return false
			}
		}
		if slices.ContainsFunc(devices, func(d corev1.VolumeDevice) bool { return d.Name == name }) {
			found = &foreignRef{kind: kind, container: container}
		}
		return found == nil
	})
	return found
}

// eachContainer calls f with the volume references of every container of
// spec, of any kind, in pod order (init, app, then ephemeral containers),
// until f returns false.
func eachContainer(spec *corev1.PodSpec, f func(kind, name string, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) bool) {
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; !f("init container", c.Name, c.VolumeMounts, c.VolumeDevices) {
			return
		}
	}
	for i := range spec.Containers {
		if c := &spec.Containers[i]; !f("container", c.Name, c.VolumeMounts, c.VolumeDevices) {
			return
		}
	}
	for i := range spec.EphemeralContainers {
		if c := &spec.EphemeralContainers[i]; !f("ephemeral container", c.Name, c.VolumeMounts, c.VolumeDevices) {
			return
		}
	}
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

func (a *applier) env(e policy.EnvVar, sel []target) {
	item := "env/" + e.Name
	if owner, ok := a.claims[item]; ok {
		a.skip(item, fmt.Sprintf("%s is claimed by policy %q, which applies first", item, owner), true)
		return
	}
	a.claims[item] = a.p.Name()
	if len(sel) == 0 {
		a.skip(item, "no container is selected", false)
		return
	}
	for _, t := range sel {
		c := t.c
		idx := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name })
		switch {
		case idx < 0:
			c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			a.st.dirty = true
		case c.Env[idx].ValueFrom == nil && c.Env[idx].Value == e.Value:
			// Already what the policy wants.
		case e.OnConflict == policy.Override:
			c.Env[idx] = corev1.EnvVar{Name: e.Name, Value: e.Value}
			a.st.dirty = true
		default:
			a.skip(fmt.Sprintf("%s[%s]", item, c.Name),
				fmt.Sprintf("container %q sets its own %s; kept (onConflict: keep)", c.Name, e.Name), true)
		}
	}
	a.applied(item)
}

func (a *applier) memory(sel []target) {
	dropped := a.podLvl == PodLevelDropped
	if lvl := a.p.Spec.Memory.Level; lvl == policy.LevelContainer || lvl == policy.LevelAuto && dropped {
		a.containerMemory(sel)
		return
	}
	const item = "memory/pod"
	if owner, ok := a.claims["memory"]; ok {
		a.skip(item, fmt.Sprintf("memory is claimed by policy %q, which applies first", owner), true)
		return
	}
	a.claims["memory"] = a.p.Name()
	if dropped {
		// The apiserver would drop spec.resources without an error: the
		// pod would run with no headroom while the status said otherwise.
		a.skip(item, PodLevelDroppedReason, true)
		return
	}
	spec := &a.pod.Spec
	var lim, req resource.Quantity
	var hasLim, hasReq bool
	if spec.Resources != nil {
		lim, hasLim = spec.Resources.Limits[corev1.ResourceMemory]
		req, hasReq = spec.Resources.Requests[corev1.ResourceMemory]
	}
	// Values this webhook set in an earlier pass are recomputed (a container
	// may have been added since); values the pod author set are respected.
	// An earlier pass records the request as "" when it kept the author's.
	var ours bool
	if pm := a.prevMemory(); pm != nil && hasLim && quantityIs(lim, pm.Limit) {
		ours = pm.Request == "" || (hasReq && quantityIs(req, pm.Request))
		ours = ours && hasReq && a.couldHaveWritten(spec, lim, req, pm.Request == "")
	}
	if hasLim && !ours {
		a.skip(item, fmt.Sprintf("the pod sets its own pod-level memory limit (%s); kept", lim.String()), false)
		return
	}
	ownReq := hasReq && (!ours || a.prevMemory().Request == "")

	wantReq := ContainerMemoryRequest(spec)
	if a.p.MemoryRequest.Cmp(wantReq) > 0 {
		wantReq = a.p.MemoryRequest.DeepCopy()
	}
	if ownReq {
		wantReq = req // the pod author's own request
	}
	wantLim := a.p.MemoryLimit.DeepCopy()
	if m := maxContainerLimit(spec); m.Cmp(wantLim) > 0 {
		wantLim = m
	}
	if wantReq.Cmp(wantLim) > 0 {
		wantLim = wantReq.DeepCopy()
	}

	if !hasLim || !hasReq || lim.Cmp(wantLim) != 0 || req.Cmp(wantReq) != 0 {
		if spec.Resources == nil {
			spec.Resources = &corev1.ResourceRequirements{}
		}
		if spec.Resources.Limits == nil {
			spec.Resources.Limits = corev1.ResourceList{}
		}
		if spec.Resources.Requests == nil {
			spec.Resources.Requests = corev1.ResourceList{}
		}
		spec.Resources.Limits[corev1.ResourceMemory] = wantLim
		spec.Resources.Requests[corev1.ResourceMemory] = wantReq
		a.st.dirty = true
	}
	a.st.PodMemory = &podMemory{Limit: wantLim.String()}
	if !ownReq {
		a.st.PodMemory.Request = wantReq.String()
	}
	a.applied(item)
}

// couldHaveWritten reports whether the pod-level memory lim and req are
// what this policy could have written on this pod in an earlier pass: the
// status annotation is the pod author's to write, so its podMemory is
// believed only then. An earlier pass set the request to the policy's
// request or the containers' (which another webhook may have raised since),
// or kept the author's (ownReq), and the limit to the largest of the
// policy's limit, that request and a container's limit.
func (a *applier) couldHaveWritten(spec *corev1.PodSpec, lim, req resource.Quantity, ownReq bool) bool {
	if !ownReq && req.Cmp(a.p.MemoryRequest) != 0 {
		if c := ContainerMemoryRequest(spec); req.Cmp(a.p.MemoryRequest) < 0 || req.Cmp(c) > 0 {
			return false
		}
	}
	floor := a.p.MemoryLimit.DeepCopy()
	if req.Cmp(floor) > 0 {
		floor = req.DeepCopy()
	}
	switch lim.Cmp(floor) {
	case 0:
		return true
	case -1:
		return false
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if q, ok := cs[i].Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(lim) == 0 {
				return true
			}
		}
	}
	return false
}

// PodLevelDroppedReason is why a memory.level pod policy injects nothing on
// an apiserver that drops pod-level resources; the client sees it as a
// warning, short enough to reach kubectl whole (TestClusterDropWarningsFit).
const PodLevelDroppedReason = "this apiserver drops pod-level resources (Kubernetes before 1.34, or PodLevelResources gate off): " +
	"no headroom; use memory.level auto or container"

func (a *applier) prevMemory() *podMemory {
	if a.prev == nil {
		return nil
	}
	return a.prev.PodMemory
}

// containerMemory is the fallback for clusters without pod-level resources:
// every selected app container without a memory limit gets the headroom as
// its limit and an explicit request (so the request does not default to the
// limit).
func (a *applier) containerMemory(sel []target) {
	const item = "memory/containers"
	// Memory is one item whatever its level: a pod-level request computed
	// by one policy would not see container requests another adds.
	if owner, ok := a.claims["memory"]; ok {
		a.skip(item, fmt.Sprintf("memory is claimed by policy %q, which applies first", owner), true)
		return
	}
	a.claims["memory"] = a.p.Name()
	// A pod that sets pod-level memory manages memory at the pod level, on
	// a cluster that supports it: container limits or requests added here
	// could exceed what it set.
	if r := a.pod.Spec.Resources; r != nil {
		_, hasLim := r.Limits[corev1.ResourceMemory]
		_, hasReq := r.Requests[corev1.ResourceMemory]
		if hasLim || hasReq {
			a.skip(item, "the pod sets its own pod-level memory; kept", false)
			return
		}
	}
	for _, t := range sel {
		if t.init {
			continue
		}
		r := &t.c.Resources
		if _, ok := r.Limits[corev1.ResourceMemory]; ok {
			continue
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		// A limit below the container's own request is invalid.
		lim := a.p.MemoryLimit.DeepCopy()
		if req, ok := r.Requests[corev1.ResourceMemory]; ok && req.Cmp(lim) > 0 {
			lim = req.DeepCopy()
		}
		r.Limits[corev1.ResourceMemory] = lim
		if _, ok := r.Requests[corev1.ResourceMemory]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[corev1.ResourceMemory] = a.p.MemoryRequest.DeepCopy()
		}
		a.st.dirty = true
	}
	a.applied(item)
}

// convert moves the pod's own memory-backed emptyDirs to disk (leak
// mitigation), except the ones the policy keeps and the ones a policy's
// cache or asset names. It runs after every policy's apply.
func (a *applier) convert() {
	for i := range a.pod.Spec.Volumes {
		v := &a.pod.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
			continue
		}
		// A volume named by a policy's cache or asset is that item's:
		// the policy's injection, or the pod's own volume, which the
		// pod keeps whole (medium included) like every item it sets.
		if _, ok := a.claims["volume/"+v.Name]; ok {
			continue
		}
		item := "convert/" + v.Name
		// The first disk-mode policy to decide about a volume owns the
		// decision: a later one neither converts what it kept nor
		// records a keep of its own, so a second pass decides the same.
		if _, ok := a.claims[item]; ok {
			continue
		}
		a.claims[item] = a.p.Name()
		if a.keeps(v.Name) {
			a.skip(item, "kept on tmpfs by keepMemoryVolumes", false)
			continue
		}
		v.EmptyDir.Medium = corev1.StorageMediumDefault
		a.st.dirty = true
		// Recorded in status.Converted, not in the policy's injected
		// items: a later pass finds the volume already on disk.
		a.st.Converted = append(a.st.Converted, v.Name)
		a.res.Applied = append(a.res.Applied, Decision{Policy: a.p.Name(), Item: item, Shadow: a.shadow})
	}
}

func (a *applier) keeps(volume string) bool {
	return slices.ContainsFunc(a.p.Spec.KeepMemoryVolumes, func(ref policy.VolumeRef) bool {
		return ref.Name != "" && ref.Name == volume || ref.MountPath != "" && mountsAt(a.pod, volume, ref.MountPath)
	})
}

// mountsAt reports whether an init or app container's first mount at
// mountPath is of volume.
func mountsAt(pod *corev1.Pod, volume, mountPath string) bool {
	at := func(m corev1.VolumeMount) bool { return m.MountPath == mountPath }
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			ms := cs[i].VolumeMounts
			if j := slices.IndexFunc(ms, at); j >= 0 && ms[j].Name == volume {
				return true
			}
		}
	}
	return false
}

func (a *applier) applied(item string) {
	a.sp.Injected = append(a.sp.Injected, item)
	a.res.Applied = append(a.res.Applied, Decision{Policy: a.p.Name(), Item: item, Shadow: a.shadow, Present: !a.st.dirty})
}

// deny refuses the pod for item, with reason; a shadow policy only reports
// that it would. The item is recorded as skipped either way.
func (a *applier) deny(item, reason string) {
	if a.shadow {
		a.skip(item, "would refuse the pod: "+reason, false)
		return
	}
	a.skip(item, "the pod is refused: "+reason, false)
	if a.res.Denied != "" {
		a.res.Denied += "; "
	}
	a.res.Denied += fmt.Sprintf("sandbox-webhook: policy %q: %s", a.p.Name(), reason)
}

func (a *applier) skip(item, reason string, warn bool) {
	a.sp.Skipped = append(a.sp.Skipped, item+": "+reason)
	a.res.Skipped = append(a.res.Skipped, Decision{Policy: a.p.Name(), Item: item, Reason: reason, Shadow: a.shadow})
	if warn {
		a.warn("%s: %s", item, reason)
	}
}

// warn adds a client-visible warning. Shadow policies only report.
func (a *applier) warn(format string, args ...any) {
	if a.shadow {
		return
	}
	msg := fmt.Sprintf("sandbox-webhook: policy %q: ", a.p.Name()) + fmt.Sprintf(format, args...)
	if !slices.Contains(a.res.Warnings, msg) {
		a.res.Warnings = append(a.res.Warnings, msg)
	}
}
