package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
)

// validate checks a defaulted policy. Every message says what is allowed.
func validate(sp *SandboxPolicy) field.ErrorList {
	errs := checkTypeMeta(sp.APIVersion, sp.Kind)
	name := field.NewPath("metadata", "name")
	if sp.Metadata.Name == "" {
		errs = append(errs, field.Required(name, "a DNS-1123 subdomain such as uv-cache"))
	}
	errs = append(errs, each(validation.IsDNS1123Subdomain, sp.Metadata.Name, name)...)

	s, spec := &sp.Spec, field.NewPath("spec")
	errs = append(errs, oneOf(spec.Child("enforcement"), s.Enforcement, enforcements...)...)
	errs = append(errs, oneOf(spec.Child("mode"), s.Mode, modes...)...)
	errs = append(errs, validateMatch(&s.Match, spec.Child("match"))...)
	containers := spec.Child("containers")
	errs = append(errs, validateGlobs(s.Containers.Include, containers.Child("include"))...)
	errs = append(errs, validateGlobs(s.Containers.Exclude, containers.Child("exclude"))...)
	if len(s.Caches) == 0 && len(s.Env) == 0 && s.Memory == nil && len(s.Assets) == 0 && s.Shm == nil && s.Disk == nil &&
		s.Runtime == nil && len(s.ImageMirrors) == 0 && s.Mode != ModeDisk {
		errs = append(errs, field.Required(spec, "a policy must inject something: set caches, env, memory, assets, shm, disk, runtime, imageMirrors, or mode: disk"))
	}

	// Names and mount paths become pod volumes and volume mounts, which must
	// be unique across caches and assets.
	names, mounts := map[string]*field.Path{}, map[string]*field.Path{}
	mount := func(fld *field.Path, name, mountPath string) {
		errs = append(errs, validateVolumeName(fld.Child("name"), name, names)...)
		errs = append(errs, validateMountPath(fld.Child("mountPath"), mountPath, mounts)...)
	}
	if s.ContainerLimits != "" {
		errs = append(errs, oneOf(spec.Child("containerLimits"), s.ContainerLimits, limitActions...)...)
	}
	for i, c := range s.Caches {
		fld := spec.Child("caches").Index(i)
		mount(fld, c.Name, c.MountPath)
		if c.SizeLimit == "" && s.ContainerLimits == RaiseLimits {
			errs = append(errs, field.Required(fld.Child("sizeLimit"), "containerLimits: raise raises a container's limit by its caches' sizeLimits; set one (such as 1Gi)"))
		}
		if c.SizeLimit != "" {
			errs = append(errs, positiveBytes(fld.Child("sizeLimit"), c.SizeLimit, "")...)
		}
	}
	for i, a := range s.Assets {
		fld := spec.Child("assets").Index(i)
		mount(fld, a.Name, a.MountPath)
		errs = append(errs, validateAsset(&a, fld)...)
	}
	for i, ref := range s.KeepMemoryVolumes {
		fld := spec.Child("keepMemoryVolumes").Index(i)
		switch {
		case ref.Name == "" && ref.MountPath == "":
			errs = append(errs, field.Required(fld, "set exactly one of name, mountPath"))
		case ref.Name != "" && ref.MountPath != "":
			errs = append(errs, field.Forbidden(fld, "set exactly one of name, mountPath, not both"))
		}
		if hasControl(ref.MountPath) {
			errs = append(errs, controlError(fld.Child("mountPath"), ref.MountPath))
		}
	}
	if s.Shm != nil {
		fld := spec.Child("shm")
		errs = append(errs, validateVolumeName(fld.Child("name"), s.Shm.Name, names)...)
		errs = append(errs, positiveBytes(fld.Child("sizeLimit"), s.Shm.SizeLimit, "a size such as 1Gi")...)
	}
	if d := s.Disk; d != nil {
		fld := spec.Child("disk")
		errs = append(errs, positiveBytes(fld.Child("limit"), d.Limit, "an ephemeral-storage quantity such as 20Gi")...)
		// An empty request (no limit to default it to) is reported above.
		if d.Request != "" {
			q, e := parseBytes(fld.Child("request"), d.Request)
			l, le := parseBytes(fld.Child("limit"), d.Limit)
			switch {
			case e != nil:
				errs = append(errs, e)
			case le == nil && (q.Sign() < 0 || q.Cmp(l) > 0):
				errs = append(errs, field.Invalid(fld.Child("request"), d.Request, "must be at least 0 and at most limit "+d.Limit))
			}
		}
	}
	errs = append(errs, validateEnv(s.Env, spec.Child("env"))...)
	if s.Runtime != nil {
		errs = append(errs, validateRuntime(s.Runtime, spec.Child("runtime"))...)
	}
	errs = append(errs, validateMirrors(s.ImageMirrors, spec.Child("imageMirrors"))...)
	if s.Memory != nil {
		errs = append(errs, validateMemory(s.Memory, spec.Child("memory"))...)
	}
	return errs
}

func validateMatch(m *Match, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(m.Namespaces) == 0 && m.NamespaceSelector == nil && m.PodSelector == nil && len(m.Any) == 0 {
		errs = append(errs, field.Required(fld, "a policy must say what it is for: set namespaces, namespaceSelector, podSelector and/or any"))
	}
	for i, b := range m.Any {
		fld := fld.Child("any").Index(i)
		if len(b.Namespaces) == 0 && b.NamespaceSelector == nil && b.PodSelector == nil {
			errs = append(errs, field.Required(fld, "each block must say what it selects: set namespaces, namespaceSelector and/or podSelector"))
		}
		errs = append(errs, b.validateSelection(fld)...)
	}
	errs = append(errs, MatchBlock{
		Namespaces: m.Namespaces, ExcludeNamespaces: m.ExcludeNamespaces,
		NamespaceSelector: m.NamespaceSelector, PodSelector: m.PodSelector, ExcludePodSelector: m.ExcludePodSelector,
	}.validateSelection(fld)...)
	if o := m.OptOut; o != nil {
		fld := fld.Child("optOut")
		if o.Label == "" && o.Annotation == "" {
			errs = append(errs, field.Required(fld, "set label and/or annotation"))
		}
		errs = append(errs, each(validation.IsQualifiedName, o.Label, fld.Child("label"))...)
		errs = append(errs, each(validation.IsQualifiedName, o.Annotation, fld.Child("annotation"))...)
	}
	return errs
}

// validateSelection checks the globs and label selectors that a block
// (and a whole match, which has the same fields) selects pods with.
func (b MatchBlock) validateSelection(fld *field.Path) field.ErrorList {
	errs := validateGlobs(b.Namespaces, fld.Child("namespaces"))
	errs = append(errs, validateGlobs(b.ExcludeNamespaces, fld.Child("excludeNamespaces"))...)
	errs = append(errs, validateSelector(b.NamespaceSelector, fld.Child("namespaceSelector"))...)
	errs = append(errs, validateSelector(b.PodSelector, fld.Child("podSelector"))...)
	return append(errs, validateSelector(b.ExcludePodSelector, fld.Child("excludePodSelector"))...)
}

// validateGlobs checks names or globs in path.Match syntax.
func validateGlobs(globs []string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range globs {
		if _, err := path.Match(g, ""); g == "" || err != nil {
			errs = append(errs, field.Invalid(fld.Index(i), g, `must be a name or a glob such as "sandbox-*" (path.Match syntax: *, ?, [a-z], \ escapes)`))
		}
	}
	return errs
}

func validateSelector(ls *metav1.LabelSelector, fld *field.Path) field.ErrorList {
	if ls == nil {
		return nil
	}
	errs := metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, fld)
	for _, e := range errs {
		// apimachinery's message does not say which operators there are.
		if e.Type == field.ErrorTypeInvalid && strings.HasSuffix(e.Field, ".operator") {
			e.Detail += ": must be one of In, NotIn, Exists, DoesNotExist"
		}
	}
	if len(errs) == 0 {
		if _, err := metav1.LabelSelectorAsSelector(ls); err != nil {
			errs = append(errs, field.Invalid(fld, ls, err.Error()))
		}
	}
	return errs
}

func validateVolumeName(fld *field.Path, name string, seen map[string]*field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "a DNS-1123 label such as uv-cache")}
	}
	errs := each(validation.IsDNS1123Label, name, fld)
	if first, ok := seen[name]; ok {
		errs = append(errs, duplicateError(fld, name, "already used by "+first.String()))
	} else {
		seen[name] = fld
	}
	return errs
}

func validateMountPath(fld *field.Path, p string, seen map[string]*field.Path) field.ErrorList {
	errs := validateAbsPath(fld, p)
	if len(errs) > 0 {
		return errs
	}
	if p == "/" {
		return field.ErrorList{field.Invalid(fld, p, "must not be /")}
	}
	if why := mountPathRisk(p); why != "" {
		return field.ErrorList{field.Invalid(fld, p, why)}
	}
	if first, ok := seen[p]; ok {
		return field.ErrorList{duplicateError(fld, p, "already used by "+first.String())}
	}
	// One mount would hide part of the other, or be hidden by it.
	for _, q := range slices.Sorted(maps.Keys(seen)) {
		if strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
			return field.ErrorList{field.Invalid(fld, p, fmt.Sprintf("must not lie under or above %s (%s)", seen[q], q))}
		}
	}
	seen[p] = fld
	return nil
}

// validateAbsPath checks that p is absolute, has no ".." and is clean, and
// has no control character.
func validateAbsPath(fld *field.Path, p string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fld, "an absolute path such as /root/.cache/uv")}
	case hasControl(p):
		return field.ErrorList{controlError(fld, p)}
	case !path.IsAbs(p):
		return field.ErrorList{field.Invalid(fld, p, "must be an absolute path")}
	case slices.Contains(strings.Split(p, "/"), ".."):
		return field.ErrorList{field.Invalid(fld, p, `must not contain ".."`)}
	case path.Clean(p) != p:
		return field.ErrorList{field.Invalid(fld, p, fmt.Sprintf("must be a clean path (%s)", path.Clean(p)))}
	}
	return nil
}

// hasControl reports whether s holds a control character: NUL, any other
// byte below 0x20, or DEL. No real path has one; printed raw, ESC or CR can
// rewrite what an operator reads in a terminal, and NUL ends the path the
// kernel sees.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func controlError(fld *field.Path, p string) *field.Error {
	return field.Invalid(fld, p, "must not contain control characters (NUL, tab, newline, ESC, DEL, any below 0x20)")
}

// protectedTrees are host directories an asset may neither be nor lie
// under, with the reason. A read-only mount still lets a client connect to a
// Unix socket, so directories that hold sockets are here whole.
var protectedTrees = []struct{ dir, why string }{
	{"/etc", "node configuration and credentials"},
	{"/proc", "kernel and process interfaces"},
	{"/sys", "kernel interfaces"},
	{"/dev", "host devices"},
	{"/boot", "the node's boot files"},
	{"/root", "the node's root home directory"},
	{"/home", "users' home directories: SSH keys, kubeconfigs"},
	{"/tmp", "the node's temporary files and sockets"},
	{"/var/tmp", "the node's temporary files and sockets"},
	{"/run", "runtime sockets and state"},
	{"/var/run", "runtime sockets and state"},
	{"/var/lib/kubelet", "node and container-runtime state"},
	{"/var/lib/containerd", "container-runtime state"},
	{"/var/lib/docker", "container-runtime state"},
	{"/var/lib/containers", "container-runtime state"},
	{"/var/lib/crio", "container-runtime state"},
	{"/var/lib/kube-proxy", "kube-proxy's credentials"},
	{"/var/lib/cloud", "cloud-init's instance data: user data, often with secrets"},
	{"/var/lib/waagent", "the Azure agent's certificates and provisioning secrets"},
	{"/var/lib/amazon", "the AWS agents' state and credentials"},
	{"/var/lib/google", "the Google guest agent's state"},
	{"/var/lib/systemd", "systemd's state, its credential key among it"},
	{"/var/lib/sss", "SSSD's cached credentials"},
	{"/var/backups", "the node's backups: copies of its password and group files"},
	{"/var/spool", "the node's cron jobs, mail and print queues"},
	{"/var/mail", "the node's users' mail"},
	{"/var/lib/cni", "network plugin state"},
	{"/var/lib/etcd", "cluster state"},
	{"/var/lib/kubernetes", "cluster credentials and state"},
	{"/srv/kubernetes", "cluster credentials and state"},
	{"/var/lib/rancher", "k3s and rke2 credentials, state and sockets"},
	{"/var/lib/k0s", "k0s credentials and state"},
	{"/var/lib/minikube", "minikube credentials and state"},
	{"/var/snap", "snap packages' state and sockets, microk8s credentials among them"},
	{"/var/log", "node logs"},
}

// protectedDirs are host directories an asset may not be, though it may
// lie under them.
var protectedDirs = []string{"/var", "/var/lib", "/usr", "/opt", "/srv", "/mnt", "/bin", "/sbin", "/lib"}

// credentialDirs are directory names that hold credentials wherever they
// are: an asset may not be, lie under or contain them.
var credentialDirs = []string{".ssh", ".kube", ".docker", ".gnupg", ".aws", ".azure"}

// hostPathRisk says why a clean absolute host path must not be mounted, or
// returns "".
func hostPathRisk(p string) string {
	if p == "/" {
		return "must not be / (the whole node filesystem)"
	}
	for _, t := range protectedTrees {
		if p == t.dir || strings.HasPrefix(p, t.dir+"/") {
			return fmt.Sprintf("must not be or lie under %s (%s)", t.dir, t.why)
		}
	}
	if slices.Contains(protectedDirs, p) {
		return fmt.Sprintf("must not be %s itself (a system directory; use a subdirectory)", p)
	}
	for _, part := range strings.Split(p, "/") {
		if slices.Contains(credentialDirs, part) {
			return fmt.Sprintf("must not be or lie under a %s directory (credentials)", part)
		}
	}
	if strings.HasSuffix(p, ".sock") || strings.HasSuffix(p, ".socket") {
		return "must not be a .sock or .socket file (container-runtime and daemon sockets)"
	}
	return ""
}

// systemMountTrees are container paths a cache or asset may neither be
// mounted at nor under, with the reason.
var systemMountTrees = []struct{ dir, why string }{
	{"/bin", "the container's programs"},
	{"/sbin", "the container's programs"},
	{"/usr", "the container's programs and libraries"},
	{"/lib", "the container's libraries"},
	{"/lib32", "the container's libraries"},
	{"/lib64", "the container's libraries"},
	{"/libx32", "the container's libraries"},
	{"/etc", "the container's configuration"},
	{"/boot", "boot files"},
	{"/proc", "kernel and process interfaces"},
	{"/sys", "kernel interfaces"},
	{"/dev", "devices"},
	{"/run/secrets", "the service-account token and other secrets"},
	{"/var/run/secrets", "the service-account token and other secrets"},
}

// systemMountDirs are container directories a cache or asset may not be
// mounted at, hiding all of the image's, though it may be mounted under
// them.
var systemMountDirs = []string{"/var", "/var/lib", "/var/run", "/run", "/root", "/home", "/opt", "/srv", "/mnt", "/tmp"}

// mountPathRisk says why a clean absolute container path must not be a
// cache's or asset's mountPath, or returns "".
func mountPathRisk(p string) string {
	if p == ShmPath {
		return "must not be /dev/shm: spec.shm gives the pod a memory-backed /dev/shm of a size"
	}
	for _, t := range systemMountTrees {
		if p == t.dir || strings.HasPrefix(p, t.dir+"/") {
			return fmt.Sprintf("must not be or lie under %s (%s)", t.dir, t.why)
		}
	}
	if slices.Contains(systemMountDirs, p) {
		return fmt.Sprintf("must not be %s itself (it would hide the image's; use a subdirectory)", p)
	}
	return ""
}

func validateAsset(a *Asset, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.HostPath == nil && a.Image == nil {
		errs = append(errs, field.Required(fld, "set hostPath, image, or both"))
	}
	if h := a.HostPath; h != nil {
		fld := fld.Child("hostPath")
		if pe := validateAbsPath(fld.Child("path"), h.Path); len(pe) > 0 {
			errs = append(errs, pe...)
		} else if why := hostPathRisk(h.Path); why != "" {
			errs = append(errs, field.Invalid(fld.Child("path"), h.Path, why))
		}
		errs = append(errs, oneOf(fld.Child("type"), h.Type, "Directory", "File")...)
	}
	if img := a.Image; img != nil {
		fld := fld.Child("image")
		if img.Reference == "" {
			errs = append(errs, field.Required(fld.Child("reference"), "an OCI image reference such as registry.example/rebench-v2:2026-01"))
		}
		errs = append(errs, oneOf(fld.Child("pullPolicy"), img.PullPolicy, "Always", "IfNotPresent", "Never")...)
	}
	if len(a.ImageForRuntimeClasses) > 0 && (a.HostPath == nil || a.Image == nil) {
		errs = append(errs, field.Forbidden(fld.Child("imageForRuntimeClasses"),
			"chooses between the asset's hostPath and image sources: set both, or drop it"))
	}
	for i, rc := range a.ImageForRuntimeClasses {
		errs = append(errs, each(validation.IsDNS1123Subdomain, rc, fld.Child("imageForRuntimeClasses").Index(i))...)
	}
	return errs
}

func validateEnv(env []EnvVar, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]*field.Path{}
	for i, e := range env {
		fld := fld.Index(i)
		name := fld.Child("name")
		if e.Name == "" {
			errs = append(errs, field.Required(name, "an environment variable name such as UV_LINK_MODE"))
		} else if first, ok := seen[e.Name]; ok {
			errs = append(errs, duplicateError(name, e.Name, "already set by "+first.String()))
		} else {
			seen[e.Name] = fld
		}
		errs = append(errs, each(validation.IsEnvVarName, e.Name, name)...)
		if e.Position != "" {
			errs = append(errs, validateEnvEntry(&e, fld)...)
			continue
		}
		if e.Separator != "" || e.IfUnset != "" {
			errs = append(errs, field.Forbidden(fld, "separator and ifUnset need position: prepend or append"))
		}
		if e.Value == "" && e.OnConflict != Override {
			// Without onConflict override, an empty value only adds an
			// empty variable to the containers that lack it: a value left
			// out by mistake. With override it clears the variable.
			errs = append(errs, field.Required(fld.Child("value"),
				"the value to set, such as copy (an empty value is allowed with onConflict: override, which clears the variable)"))
		}
		errs = append(errs, oneOf(fld.Child("onConflict"), e.OnConflict, conflictActions...)...)
	}
	return errs
}

// validateEnvEntry checks an env item with a position: an entry added to
// a list variable.
func validateEnvEntry(e *EnvVar, fld *field.Path) field.ErrorList {
	errs := oneOf(fld.Child("position"), e.Position, envPositions...)
	if e.OnConflict != "" {
		errs = append(errs, field.Forbidden(fld.Child("onConflict"), "an entry is added to the container's own value, never in conflict with it: drop onConflict, or drop position to set the variable"))
	}
	switch {
	case e.Value == "":
		errs = append(errs, field.Required(fld.Child("value"), "the entry to add, such as /opt/tools/bin"))
	case strings.Contains(e.Value, e.Separator):
		errs = append(errs, field.Invalid(fld.Child("value"), e.Value, fmt.Sprintf("must be one entry, without the separator %q", e.Separator)))
	}
	if e.Separator == "" {
		errs = append(errs, field.Required(fld.Child("separator"), `the list's separator, such as ":"`))
	}
	return errs
}

// validateRuntime checks runtime placement: names as the API server
// checks them.
func validateRuntime(r *Runtime, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.ClassName == "" && len(r.Tolerations) == 0 && len(r.NodeSelector) == 0 {
		errs = append(errs, field.Required(fld, "set className, tolerations and/or nodeSelector"))
	}
	if r.ClassName != "" {
		errs = append(errs, each(validation.IsDNS1123Subdomain, r.ClassName, fld.Child("className"))...)
	}
	for i, t := range r.Tolerations {
		fld := fld.Child("tolerations").Index(i)
		if t.Key != "" {
			errs = append(errs, each(validation.IsQualifiedName, t.Key, fld.Child("key"))...)
		}
		errs = append(errs, oneOf(fld.Child("operator"), t.Operator, operators...)...)
		switch {
		case t.Key == "" && t.Operator != corev1.TolerationOpExists:
			errs = append(errs, field.Invalid(fld.Child("operator"), t.Operator, "must be Exists when key is empty (a toleration of every taint)"))
		case t.Operator == corev1.TolerationOpExists && t.Value != "":
			errs = append(errs, field.Invalid(fld.Child("value"), t.Value, "must be empty with operator Exists"))
		case t.Value != "":
			errs = append(errs, each(validation.IsValidLabelValue, t.Value, fld.Child("value"))...)
		}
		if t.Effect != "" {
			errs = append(errs, oneOf(fld.Child("effect"), t.Effect, taintEffects...)...)
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(fld.Child("effect"), t.Effect, "must be NoExecute with tolerationSeconds"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.NodeSelector)) {
		errs = append(errs, each(validation.IsQualifiedName, k, fld.Child("nodeSelector").Key(k))...)
		errs = append(errs, each(validation.IsValidLabelValue, r.NodeSelector[k], fld.Child("nodeSelector").Key(k))...)
	}
	return append(errs, oneOf(fld.Child("onConflict"), r.OnConflict, conflictActions...)...)
}

// validateMirrors checks the image mirror rules: registries or repository
// prefixes as the runtime names them, and no mirror that a rule would
// rewrite again.
func validateMirrors(rules []ImageMirror, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		fld := fld.Index(i)
		for _, f := range []struct {
			name, v string
		}{{"from", r.From}, {"to", r.To}} {
			if why := imageref.CheckPrefix(f.v); why != "" {
				errs = append(errs, field.Invalid(fld.Child(f.name), f.v, why))
			}
		}
		for j, other := range rules {
			if imageref.Under(r.To+"/x", other.From) {
				errs = append(errs, field.Invalid(fld.Child("to"), r.To,
					fmt.Sprintf("lies under spec.imageMirrors[%d].from %q, so a mirrored image would be rewritten again: mirror to a registry or path no rule rewrites", j, other.From)))
			}
		}
	}
	return errs
}

func validateMemory(m *Memory, fld *field.Path) field.ErrorList {
	errs := positiveBytes(fld.Child("limit"), m.Limit, "a memory quantity such as 8Gi")
	limit, _ := resource.ParseQuantity(m.Limit) // compared only when valid
	if m.Request != "" {
		q, e := parseBytes(fld.Child("request"), m.Request)
		switch {
		case e != nil:
			errs = append(errs, e)
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(fld.Child("request"), m.Request, "must not be negative"))
		case len(errs) == 0 && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(fld.Child("request"), m.Request, "must not exceed limit "+m.Limit))
		}
	}
	return append(errs, oneOf(fld.Child("level"), m.Level, levels...)...)
}

// maxBytes bounds every byte quantity of a policy: no node has more memory
// or disk, and anything larger would clamp silently to the largest int64
// once the apiserver or the kubelet reads it as bytes.
var maxBytes = resource.MustParse("1Pi")

// parseBytes parses a byte quantity: a whole number of bytes, at most
// maxBytes. The sign is left to the caller.
func parseBytes(fld *field.Path, s string) (resource.Quantity, *field.Error) {
	q, err := resource.ParseQuantity(s)
	switch {
	case err != nil:
		return q, field.Invalid(fld, s, "must be a quantity such as 1Gi")
	case q.Sign() < 0:
		return q, nil
	case q.Cmp(maxBytes) > 0:
		return q, field.Invalid(fld, s, "must be at most 1Pi: no node has more memory or disk")
	}
	// Value rounds up to whole bytes: a quantity equal to its rounding
	// is whole.
	if q.Cmp(*resource.NewQuantity(q.Value(), q.Format)) != 0 {
		return q, field.Invalid(fld, s, "must be a whole number of bytes, such as 512Mi or 1Gi")
	}
	return q, nil
}

// positiveBytes checks a required byte quantity greater than zero; example
// says what is wanted when it is missing.
func positiveBytes(fld *field.Path, s, example string) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(fld, example)}
	}
	q, e := parseBytes(fld, s)
	switch {
	case e != nil:
		return field.ErrorList{e}
	case q.Sign() <= 0:
		return field.ErrorList{field.Invalid(fld, s, "must be greater than zero")}
	}
	return nil
}

// oneOf checks an enumerated field (already defaulted).
func oneOf[T ~string](fld *field.Path, v T, allowed ...T) field.ErrorList {
	if slices.Contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, v, allowed)}
}

// each turns the messages of a k8s.io/apimachinery validation function
// into errors; empty values are left to the caller.
func each(check func(string) []string, v string, fld *field.Path) field.ErrorList {
	if v == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range check(v) {
		errs = append(errs, field.Invalid(fld, v, msg))
	}
	return errs
}
