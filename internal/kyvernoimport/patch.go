package kyvernoimport

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Which container lists a part goes into.
const (
	inContainers = 1 << iota
	inInit
)

// listBits are the bits of the container lists a part can go into.
var listBits = map[string]int{"containers": inContainers, "initContainers": inInit}

// injection is what one rule, or the rules of one match, put into a pod.
type injection struct {
	volumes []volume
	mounts  map[string]*mount // by volume name
	env     []envVar
	memory  *policy.Memory
	shm     *policy.Shm
	disk    *policy.Disk
	init    bool       // the per-container parts reach init containers too
	sel     *selection // the containers they go into by name
	// byAnchor says a (name) anchor other than "*" selects them.
	byAnchor bool
	place    *placement
	mirrors  []mirror
}

type volume struct {
	name      string
	medium    string // emptyDir
	sizeLimit string
	hostPath  *policy.HostPathSource
	path      *field.Path
}

type mount struct {
	mountPath string
	readOnly  bool
	lists     int
	path      *field.Path
}

type envVar struct {
	policy.EnvVar
	lists int
}

func newInjection() *injection {
	return &injection{mounts: map[string]*mount{}, place: newPlacement()}
}

// empty reports whether inj puts nothing into a pod.
func (inj *injection) empty() bool {
	return len(inj.volumes) == 0 && len(inj.env) == 0 && inj.memory == nil && inj.shm == nil && inj.disk == nil &&
		inj.place.empty() && len(inj.mirrors) == 0
}

// compatible reports whether o can join inj in one SandboxPolicy: no part
// of one contradicts the other.
func (inj *injection) compatible(o *injection) bool {
	if inj.memory != nil && o.memory != nil || inj.shm != nil && o.shm != nil || inj.disk != nil && o.disk != nil {
		return false
	}
	for _, v := range o.volumes {
		if slices.ContainsFunc(inj.volumes, func(w volume) bool { return w.name == v.name }) {
			return false
		}
	}
	for _, e := range o.env {
		if slices.ContainsFunc(inj.env, func(f envVar) bool { return f.Name == e.Name }) {
			return false
		}
	}
	for _, m := range o.mirrors {
		if slices.ContainsFunc(inj.mirrors, func(n mirror) bool { return n.From == m.From }) {
			return false
		}
	}
	return inj.place.compatible(o.place)
}

// add joins o, compatible, into inj.
func (inj *injection) add(o *injection) {
	inj.volumes = append(inj.volumes, o.volumes...)
	maps.Copy(inj.mounts, o.mounts)
	inj.env = append(inj.env, o.env...)
	inj.memory = cmp.Or(o.memory, inj.memory)
	inj.shm = cmp.Or(o.shm, inj.shm)
	inj.disk = cmp.Or(o.disk, inj.disk)
	inj.place.add(o.place)
	inj.mirrors = append(inj.mirrors, o.mirrors...)
}

// check leaves out, with the reason, what cannot become a SandboxPolicy
// part, and settles which container lists the rule reaches.
func (inj *injection) check(r *ruleConverter) {
	lists := 0
	reach := func(l int, path *field.Path, what string) bool {
		switch {
		case l&inContainers == 0:
			r.leave(path, what+" goes into init containers only; a SandboxPolicy's parts go into the app containers, and the init containers too or not")
			return false
		case lists != 0 && l != lists:
			r.leave(path, what+" goes into other container lists than the rule's other parts; a SandboxPolicy puts all its parts into the same containers")
			return false
		}
		lists = l
		return true
	}
	var kept []volume
	mode := ""
	for _, v := range inj.volumes {
		m := inj.mounts[v.name]
		switch {
		case m == nil:
			r.leave(v.path, fmt.Sprintf("volume %q is mounted in no container; a SandboxPolicy mounts its volumes in every container it selects", v.name))
			continue
		case m.mountPath == policy.ShmPath && v.hostPath == nil && v.medium == "Memory" && v.sizeLimit != "" && !m.readOnly:
			if reach(m.lists, m.path, fmt.Sprintf("the mount of volume %q", v.name)) {
				inj.shm = &policy.Shm{Name: v.name, SizeLimit: v.sizeLimit}
			}
			continue
		case m.mountPath == "/dev" || strings.HasPrefix(m.mountPath, "/dev/"):
			r.leave(m.path, fmt.Sprintf("volume %q is mounted at %s: sandbox-webhook mounts nothing under /dev but spec.shm, a writable memory-backed emptyDir with a sizeLimit at /dev/shm", v.name, m.mountPath))
			continue
		case v.hostPath != nil && !m.readOnly:
			r.leave(m.path, fmt.Sprintf("hostPath volume %q is mounted writable; sandbox-webhook mounts host paths read-only only", v.name))
			continue
		case v.hostPath == nil && m.readOnly:
			r.leave(m.path, fmt.Sprintf("emptyDir %q is mounted read-only; a cache is writable", v.name))
			continue
		case !reach(m.lists, m.path, fmt.Sprintf("the mount of volume %q", v.name)):
			continue
		}
		if v.hostPath == nil {
			md := "disk"
			if v.medium == "Memory" {
				md = "memory"
			}
			if mode != "" && md != mode {
				r.leave(v.path, fmt.Sprintf("emptyDir %q is on %s, another of the rule's on %s; a SandboxPolicy puts all its caches on one medium", v.name, md, mode))
				continue
			}
			mode = md
		}
		kept = append(kept, v)
	}
	for name, m := range inj.mounts {
		if !slices.ContainsFunc(inj.volumes, func(v volume) bool { return v.name == name }) {
			r.leave(m.path, fmt.Sprintf("mounts volume %q, which the rule does not add; a SandboxPolicy mounts only the volumes it adds", name))
		}
	}
	inj.volumes = kept
	if inj.byAnchor && len(kept) > 0 {
		r.differs(r.path.Child("mutate"), "Kyverno adds the rule's volumes to a pod none of whose containers the (name) anchor selects, mounted nowhere; sandbox-webhook adds a cache or asset only to a pod it mounts it in")
	}
	var env []envVar
	for i, e := range inj.env {
		if reach(e.lists, field.NewPath("env").Index(i), fmt.Sprintf("env var %s", e.Name)) {
			env = append(env, e)
		}
	}
	inj.env = env
	inj.init = lists&inInit != 0
	inj.place.check(r)
	inj.checkMirrors(r)
}

// spec is the SandboxPolicy spec of inj, the match left to the caller.
func (inj *injection) spec() policy.Spec {
	var s policy.Spec
	for _, v := range inj.volumes {
		m := inj.mounts[v.name]
		if v.hostPath != nil {
			s.Assets = append(s.Assets, policy.Asset{Name: v.name, MountPath: m.mountPath, HostPath: v.hostPath})
			continue
		}
		s.Caches = append(s.Caches, policy.Cache{Name: v.name, MountPath: m.mountPath, SizeLimit: v.sizeLimit})
		if v.medium != "Memory" {
			s.Mode = policy.ModeDisk
		} else {
			s.Mode = policy.ModeMemory
		}
	}
	for _, e := range inj.env {
		s.Env = append(s.Env, e.EnvVar)
	}
	s.Memory = inj.memory
	s.Shm, s.Disk = inj.shm, inj.disk
	s.Runtime = inj.place.runtime()
	for _, m := range inj.mirrors {
		s.ImageMirrors = append(s.ImageMirrors, m.ImageMirror)
	}
	// Runtime placement and mirrors do not follow the container selector:
	// a policy of them alone keeps the default one.
	perContainer := len(inj.volumes) > 0 || len(inj.env) > 0 || inj.memory != nil || inj.shm != nil || inj.disk != nil
	if !inj.init && perContainer {
		s.Containers.InitContainers = ptr.To(false)
	}
	if inj.sel != nil {
		s.Containers.Include, s.Containers.Exclude = inj.sel.include, inj.sel.exclude
	}
	return s
}

// pod reads a strategic merge patch of a pod, or of a workload's pod
// template (r.podPath leads to the pod spec). lists is set inside a
// foreach: the container lists it iterates.
func (r *ruleConverter) pod(inj *injection, p map[string]any, path *field.Path, lists []string) {
	spec, sp := p, path
	for i, want := range r.podPath {
		var next map[string]any
		for _, k := range sortedKeys(spec) {
			kp := sp.Child(k)
			if k != want {
				why := "not converted: sandbox-webhook writes a pod's spec only (and its own status annotation)"
				if i > 0 {
					why = fmt.Sprintf("not converted: the rule matches %s, whose pods are made from %s; sandbox-webhook writes the pod's spec only (and its own status annotation)",
						strings.Join(r.workloads, ", "), strings.Join(r.podPath, "."))
				}
				r.leave(kp, why)
				continue
			}
			next, _ = spec[k].(map[string]any)
		}
		spec, sp = next, sp.Child(want)
	}
	for _, sk := range sortedKeys(spec) {
		kp := sp.Child(sk)
		switch sk {
		case "volumes":
			list, _ := spec[sk].([]any)
			for i, v := range list {
				vm, _ := v.(map[string]any)
				r.volume(inj, vm, kp.Index(i))
			}
		case "containers", "initContainers":
			list, _ := spec[sk].([]any)
			if lists != nil && !slices.Contains(lists, sk) {
				r.leave(kp, fmt.Sprintf("patches %s while iterating %s; the element it names is not one of them", sk, strings.Join(lists, " and ")))
				continue
			}
			for i, c := range list {
				cm, _ := c.(map[string]any)
				r.container(inj, cm, kp.Index(i), listBits[sk], lists, sk)
			}
		case "ephemeralContainers":
			r.ephemeral(spec[sk], kp, lists)
		case "resources":
			res, _ := spec[sk].(map[string]any)
			r.memory(inj, res, kp, policy.LevelPod)
		case "runtimeClassName", "+(runtimeClassName)", "nodeSelector", "tolerations":
			if lists != nil {
				r.leave(kp, inForeachWhy(lists))
				continue
			}
			switch sk {
			case "nodeSelector":
				r.nodeSelector(inj, spec[sk], kp)
			case "tolerations":
				r.tolerations(inj, spec[sk], kp)
			default:
				r.runtimeClass(inj, sk, spec[sk], kp)
			}
		default:
			r.leave(kp, "not converted: sandbox-webhook adds volumes, mounts, env, memory, runtime placement and image mirrors only")
		}
	}
}

// ephemeral reads a patch of the ephemeral containers. A pod has none when
// it is created: the API server refuses them there and adds them later,
// through pods/ephemeralcontainers. So a patch that edits the ones the pod
// has changes nothing at creation; one that adds a container is left out.
func (r *ruleConverter) ephemeral(v any, path *field.Path, lists []string) {
	list, _ := v.([]any)
	for i, c := range list {
		cm, _ := c.(map[string]any)
		name, _ := cm["name"].(string)
		_, anchored := cm["(name)"]
		element := slices.Equal(lists, []string{"ephemeralContainers"}) && elementName.MatchString(name)
		if !anchored && !element {
			r.leave(path.Index(i), "adds an ephemeral container; sandbox-webhook adds no container")
			return
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("%s: edits ephemeral containers, which a pod does not have when it is created (the API server adds them later, through pods/ephemeralcontainers); sandbox-webhook's items never go into ephemeral containers", path))
}

// elementName matches the name a foreach patch gives its element.
var elementName = regexp.MustCompile(`^\{\{\s*element\.name\s*\}\}$`)

// container reads one container element of a patch of list (containers or
// initContainers): in a foreach over lists, the iterated element; otherwise
// it must be every container, (name): "*".
func (r *ruleConverter) container(inj *injection, c map[string]any, path *field.Path, list int, lists []string, listName string) {
	inForeach := lists != nil
	named := false
	for _, k := range sortedKeys(c) {
		kp := path.Child(k)
		switch {
		case k == "(name)" && !inForeach:
			pattern, _ := c[k].(string)
			sel, why := anchorSelection(pattern)
			if why != "" {
				r.leave(kp, fmt.Sprintf("a condition on container names (%v): %s; write the selection in spec.containers", c[k], why))
				return
			}
			if !r.selects(inj, sel, kp) {
				return
			}
			inj.byAnchor = inj.byAnchor || pattern != "*"
			named = true
		case (k == "name" || k == "(name)") && inForeach:
			// The element itself: by its name, or by the anchor that
			// selects the container of its name.
			if s, _ := c[k].(string); !elementName.MatchString(s) {
				r.leave(kp, "the patch names another container than the foreach element")
				return
			}
			if k == "name" && len(lists) > 1 {
				// Names are unique across a pod's container lists: the
				// anchor selects the element in its own list only.
				r.leave(kp, fmt.Sprintf("name without the (name) anchor, in a foreach over %s: for each element of the other lists Kyverno adds a container of its name to %s; the (name) anchor edits the element in its own list only",
					strings.Join(lists, ", "), listName))
				return
			}
			if !r.selects(inj, r.foreachSel, kp) {
				return
			}
			named = true
		case k == "name":
			r.leave(kp, fmt.Sprintf("name %v without the (name) anchor adds or edits the container of that name; in Kyverno only (name): \"*\" means every container", c[k]))
			return
		}
	}
	if !named {
		r.leave(path, "the patch does not say which containers; (name): \"*\" (or a foreach over the containers) means every container")
		return
	}
	for _, k := range sortedKeys(c) {
		kp := path.Child(k)
		switch k {
		case "(name)", "name":
		case "volumeMounts":
			mounts, _ := c[k].([]any)
			for i, m := range mounts {
				mm, _ := m.(map[string]any)
				r.mount(inj, mm, kp.Index(i), list)
			}
		case "env":
			env, _ := c[k].([]any)
			for i, e := range env {
				em, _ := e.(map[string]any)
				r.env(inj, em, kp.Index(i), list, inForeach)
			}
		case "resources":
			res, _ := c[k].(map[string]any)
			r.memory(inj, res, kp, policy.LevelContainer)
		case "image":
			if !inForeach {
				r.leave(kp, "sets every container's image to one value; sandbox-webhook rewrites images by registry (imageMirrors), from a foreach over the containers")
				continue
			}
			r.image(inj, c[k], kp, list)
		default:
			r.leave(kp, "not converted: sandbox-webhook adds mounts, env and memory to containers, and rewrites their images")
		}
	}
}

func (r *ruleConverter) volume(inj *injection, v map[string]any, path *field.Path) {
	name, _ := v["name"].(string)
	if name == "" {
		r.leave(path, "a volume without a plain name")
		return
	}
	vol := volume{name: name, path: path}
	for _, k := range sortedKeys(v) {
		kp := path.Child(k)
		switch k {
		case "name":
		case "emptyDir":
			ed, _ := v[k].(map[string]any)
			for _, ek := range sortedKeys(ed) {
				switch ek {
				case "medium":
					vol.medium, _ = ed[ek].(string)
					if vol.medium != "Memory" && vol.medium != "" {
						r.leave(kp.Child(ek), fmt.Sprintf("medium %q: an emptyDir is on Memory or on disk", vol.medium))
						return
					}
				case "sizeLimit":
					vol.sizeLimit = scalar(ed[ek])
				default:
					r.leave(kp.Child(ek), "not converted: an emptyDir field this import does not know")
					return
				}
			}
		case "hostPath":
			hp, _ := v[k].(map[string]any)
			vol.hostPath = &policy.HostPathSource{}
			for _, hk := range sortedKeys(hp) {
				switch hk {
				case "path":
					vol.hostPath.Path, _ = hp[hk].(string)
				case "type":
					vol.hostPath.Type, _ = hp[hk].(string)
				default:
					r.leave(kp.Child(hk), "not converted: a hostPath field this import does not know")
					return
				}
			}
		default:
			r.leave(kp, "a volume of another type than emptyDir or hostPath: sandbox-webhook adds caches (emptyDir) and read-only data (hostPath, image)")
			return
		}
	}
	if vol.hostPath == nil && !slices.Contains(sortedKeys(v), "emptyDir") {
		r.leave(path, "a volume of no type")
		return
	}
	inj.volumes = append(inj.volumes, vol)
}

func (r *ruleConverter) mount(inj *injection, m map[string]any, path *field.Path, list int) {
	name, _ := m["name"].(string)
	mountPath, _ := m["mountPath"].(string)
	if name == "" || mountPath == "" {
		r.leave(path, "a mount without a plain name and mountPath")
		return
	}
	mt := &mount{mountPath: mountPath, lists: list, path: path}
	for _, k := range sortedKeys(m) {
		switch k {
		case "name", "mountPath":
		case "readOnly":
			mt.readOnly, _ = m[k].(bool)
		default:
			r.leave(path.Child(k), "not converted: a SandboxPolicy mounts whole volumes, without propagation")
			return
		}
	}
	if old, ok := inj.mounts[name]; ok {
		if old.mountPath != mountPath || old.readOnly != mt.readOnly {
			r.leave(path, fmt.Sprintf("volume %q is mounted at two paths; a SandboxPolicy mounts a volume once per container", name))
			return
		}
		old.lists |= list
		return
	}
	inj.mounts[name] = mt
}

// env reads one env var of a container's patch; element says it is a
// foreach element's strategic merge, whose value may add to the
// element's own (listEntry).
func (r *ruleConverter) env(inj *injection, e map[string]any, path *field.Path, list int, element bool) {
	name, _ := e["name"].(string)
	if name == "" {
		r.leave(path, "an env var without a plain name")
		return
	}
	ev := envVar{EnvVar: policy.EnvVar{Name: name}, lists: list}
	set := false
	for _, k := range sortedKeys(e) {
		switch k {
		case "name":
		case "value":
			ev.Value, ev.OnConflict, set = scalar(e[k]), policy.Override, true
		case "+(value)":
			ev.Value, ev.OnConflict, set = scalar(e[k]), policy.Keep, true
		default:
			r.leave(path.Child(k), "not converted: a SandboxPolicy sets literal values (value, or +(value) when absent)")
			return
		}
	}
	if !set {
		r.leave(path, "an env var without a value")
		return
	}
	differs := ""
	if strings.Contains(ev.Value, "{{") {
		entry, ok := listEntry(name, ev.Value)
		if !ok || !element || ev.OnConflict != policy.Override {
			why := "a value built from variables; a SandboxPolicy sets literal values"
			if strings.Contains(ev.Value, "element.env") {
				why = "adds to the container's own " + name + ": " + listEntryWhy
			}
			r.leave(path, why)
			return
		}
		ev.EnvVar, differs = entry, listEntryDifference(entry)
	}
	for i := range inj.env {
		if inj.env[i].Name == name && inj.env[i].EnvVar == ev.EnvVar {
			inj.env[i].lists |= list
			return
		}
	}
	switch {
	case differs != "":
		r.differs(path.Child("value"), differs)
	case ev.OnConflict == policy.Keep:
		r.differs(path.Child("+(value)"), fmt.Sprintf("Kyverno keeps a container's own %s, but adds it without a value to a container that lacks it (the anchor guards the value, not the variable); onConflict: keep sets the value there", name))
	}
	inj.env = append(inj.env, ev)
}

// memory reads resources of the pod or of every container: memory limits
// and requests.
func (r *ruleConverter) memory(inj *injection, res map[string]any, path *field.Path, level policy.Level) {
	for _, k := range sortedKeys(res) {
		kp := path.Child(k)
		if k != "limits" && k != "requests" {
			r.leave(kp, "not converted: a SandboxPolicy sets memory and ephemeral-storage limits and requests only")
			continue
		}
		rl, _ := res[k].(map[string]any)
		for _, rk := range sortedKeys(rl) {
			rp := kp.Child(rk)
			if rk == "ephemeral-storage" && level == policy.LevelContainer {
				if inj.disk == nil {
					inj.disk = &policy.Disk{}
				}
				if k == "limits" {
					inj.disk.Limit = scalar(rl[rk])
				} else {
					inj.disk.Request = scalar(rl[rk])
				}
				continue
			}
			if rk != "memory" && rk != "+(memory)" {
				r.leave(rp, "not converted: a SandboxPolicy sets memory only")
				continue
			}
			if inj.memory == nil {
				inj.memory = &policy.Memory{Level: level}
			}
			if inj.memory.Level != level {
				r.leave(rp, "memory at the pod level and in the containers: a SandboxPolicy sets one or the other")
				continue
			}
			if k == "limits" {
				inj.memory.Limit = scalar(rl[rk])
			} else {
				inj.memory.Request = scalar(rl[rk])
			}
			if rk == "memory" {
				r.differs(rp, fmt.Sprintf("replaces any memory %s the %[2]s sets; sandbox-webhook keeps the %[2]s's own and raises the headroom to what the pod asks for (+(memory) says add-if-absent)",
					strings.TrimSuffix(k, "s"), level))
			}
		}
	}
	if inj.memory != nil && level == policy.LevelContainer {
		r.differs(path, "Kyverno sets each memory field a container lacks; sandbox-webhook's container level gives its limit and request only to a container without a memory limit, on a pod without pod-level memory, and never a limit below the container's request")
	}
	if d := inj.disk; d != nil && level == policy.LevelContainer {
		if d.Limit == "" {
			r.leave(path, "an ephemeral-storage request without a limit: a SandboxPolicy's disk is a budget, a limit with an optional request")
			inj.disk = nil
		} else {
			r.differs(path, "Kyverno gives every container this ephemeral-storage, so the pod's budget is it times the containers; sandbox-webhook gives it to the first selected app container alone, so that it is the pod's budget, and keeps a pod's own values")
		}
	}
	if inj.memory != nil && inj.memory.Limit == "" {
		r.leave(path, "a memory request without a limit: a SandboxPolicy's memory is a limit (with an optional request)")
		inj.memory = nil
	}
}

// jsonPatch reads a patchesJson6902 (a YAML string of operations). lists is
// set inside a foreach: the containers it iterates.
func (r *ruleConverter) jsonPatch(inj *injection, v any, path *field.Path, lists []string) {
	var ops []any
	switch p := v.(type) {
	case string:
		// Kyverno substitutes the variables in the patch's text before it
		// reads the YAML: an expression is what the text holds, its
		// escapes not yet read as YAML's.
		text, exprs := holdExpressions(p)
		if err := sigsyaml.Unmarshal([]byte(text), &ops); err != nil {
			r.leave(path, "not a list of JSON patch operations: "+err.Error())
			return
		}
		restoreExpressions(ops, exprs)
	case []any:
		ops = p
	}
	listBit := 0
	for _, l := range lists {
		listBit |= listBits[l]
	}
	// The pod template's path, for a rule that edits one: /spec/template.
	prefix := ""
	if n := len(r.podPath); n > 1 {
		prefix = "/" + strings.Join(r.podPath[:n-1], "/")
	}
	for i, o := range ops {
		op, _ := o.(map[string]any)
		opName, _ := op["op"].(string)
		p, _ := op["path"].(string)
		value, _ := op["value"].(map[string]any)
		ip := path.Index(i)
		if prefix != "" {
			rest, ok := strings.CutPrefix(p, prefix)
			if !ok || !strings.HasPrefix(rest, "/spec/") {
				r.leave(ip.Child("path"), fmt.Sprintf("%s is not in the pod template (%s/spec) of the %s it matches; sandbox-webhook writes the pod's spec only", p, prefix, strings.Join(r.workloads, ", ")))
				continue
			}
			p = rest
		}
		segs := strings.Split(elementIndex.ReplaceAllString(p, "*"), "/")
		switch {
		case opName == "add" && len(segs) == 4 && segs[1] == "spec" && segs[2] == "volumes" && value != nil:
			r.volume(inj, value, ip.Child("value"))
		case (opName == "add" || opName == "replace") && p == "/spec/resources/limits/memory":
			r.memory(inj, map[string]any{"limits": map[string]any{"memory": op["value"]}}, ip, policy.LevelPod)
		case opName == "add" && p == "/spec/tolerations/-" && lists != nil:
			r.leave(ip, inForeachWhy(lists)+", and appends the toleration once per element")
		case opName == "add" && p == "/spec/tolerations/-":
			r.tolerationOp(inj, op, ip)
		case len(segs) >= 4 && segs[1] == "spec" && (segs[2] == "containers" || segs[2] == "initContainers") && segs[3] != "*":
			r.leave(ip.Child("path"), fmt.Sprintf("%s names one container by its index; every container needs a foreach over request.object.spec.%s", p, segs[2]))
		case len(segs) >= 4 && segs[3] == "*" && len(lists) > 1:
			r.leave(ip.Child("path"), fmt.Sprintf("{{elementIndex}} counts the elements of %s together, so as an index into %s it names other containers than the element", strings.Join(lists, ", "), segs[2]))
		case len(segs) == 5 && segs[3] == "*" && segs[4] == "image" && (opName == "replace" || opName == "add") && slices.Contains(lists, segs[2]):
			if r.selects(inj, r.foreachSel, ip) {
				r.image(inj, op["value"], ip.Child("value"), listBits[segs[2]])
			}
		case len(segs) == 6 && segs[3] == "*" && segs[5] == "-" && opName == "add" && value != nil && slices.Contains(lists, segs[2]):
			if !r.selects(inj, r.foreachSel, ip) {
				continue
			}
			switch segs[4] {
			case "volumeMounts":
				r.mount(inj, value, ip.Child("value"), listBit)
			case "env":
				r.env(inj, value, ip.Child("value"), listBit, false)
				r.notes = append(r.notes, fmt.Sprintf("%s: appending env var %v adds a second entry when the container sets it already (the later wins); sandbox-webhook replaces the container's own value instead", ip, value["name"]))
			default:
				r.leave(ip, "not converted: sandbox-webhook adds mounts and env to containers only")
			}
		default:
			r.leave(ip, fmt.Sprintf("%s %s: not converted; of JSON patches import converts volumes, mounts, env, memory, appended tolerations and a foreach element's image rewrite", opName, p))
		}
	}
}

var elementIndex = regexp.MustCompile(`\{\{\s*elementIndex\s*\}\}`)

// containerLists are the container lists of a pod spec.
var containerLists = []string{"containers", "initContainers", "ephemeralContainers"}

// foreachLists reads a foreach list: one container list of the pod spec the
// rule edits (request.object.spec.containers, or
// request.object.spec.template.spec.containers for a workload), or several
// flattened into one, request.object.spec.[initContainers, containers][],
// as Kyverno's samples iterate every container. "|| `[]`" (the list empty
// where the pod has none) changes nothing.
func (r *ruleConverter) foreachLists(list string) ([]string, bool) {
	expr := strings.TrimSuffix(strings.ReplaceAll(list, " ", ""), "||`[]`")
	rest, ok := strings.CutPrefix(expr, "request.object."+strings.Join(r.podPath, ".")+".")
	if !ok {
		return nil, false
	}
	if slices.Contains(containerLists, rest) {
		return []string{rest}, true
	}
	inner, open := strings.CutPrefix(rest, "[")
	inner, closed := strings.CutSuffix(inner, "][]")
	if !open || !closed {
		return nil, false
	}
	lists := strings.Split(inner, ",")
	for i, l := range lists {
		if !slices.Contains(containerLists, l) || slices.Contains(lists[:i], l) {
			return nil, false
		}
	}
	return lists, true
}

func (r *ruleConverter) foreach(inj *injection, v any, path *field.Path) {
	entries, _ := v.([]any)
	for i, e := range entries {
		em, _ := e.(map[string]any)
		ep := path.Index(i)
		list, _ := em["list"].(string)
		lists, ok := r.foreachLists(list)
		if !ok {
			spec := "request.object." + strings.Join(r.podPath, ".")
			r.leave(ep.Child("list"), fmt.Sprintf("iterates %q; import converts a foreach over %s.containers or .initContainers, or several container lists flattened (%s.[initContainers, containers][])", list, spec, spec))
			continue
		}
		r.foreachSel = selection{}
		if pre, ok := em["preconditions"]; ok {
			sel, at, why := foreachSelection(pre, ep.Child("preconditions"))
			if why != "" {
				r.leave(at, "not converted: the foreach's preconditions decide per container on what a SandboxPolicy cannot express: "+why)
				continue
			}
			r.foreachSel = sel
		}
		for _, k := range sortedKeys(em) {
			kp := ep.Child(k)
			switch k {
			case "list", "order", "preconditions":
			case "patchStrategicMerge":
				p, _ := em[k].(map[string]any)
				r.pod(inj, p, kp, lists)
			case "patchesJson6902":
				r.jsonPatch(inj, em[k], kp, lists)
			default: // preconditions, context, nested foreach
				r.leave(kp, "not converted: a foreach with "+k+" decides per container on what a SandboxPolicy cannot express")
			}
		}
	}
}

// scalar returns a value written as a string, a number or a boolean (a
// quantity, an env value) as text.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}
