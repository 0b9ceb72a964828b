package mapexport

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// program collects the CEL of one MutatingAdmissionPolicy: its variables
// (evaluated lazily, per mutation, against the object as that mutation sees
// it) and its mutations.
type program struct {
	vars      []admissionregistrationv1.Variable
	mutations []admissionregistrationv1.Mutation
}

// def defines a variable and returns the expression that reads it.
func (pr *program) def(name, expr string) string {
	pr.vars = append(pr.vars, admissionregistrationv1.Variable{Name: name, Expression: layout(expr)})
	return "variables." + name
}

func (pr *program) jsonPatch(expr string) {
	pr.mutations = append(pr.mutations, admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: layout(expr)},
	})
}

// pod holds the variables every policy block reads: the pod's containers
// and volumes, the namespace's Pod Security level, and what an earlier pass
// recorded in the status annotation.
type pod struct {
	inits, apps, ephemerals, volumes string
	forbidsHostPath                  string
	// prev* read the status annotation an earlier pass wrote (the MAP's own
	// on reinvocation, or the webhook's on a re-created pod). The webhook
	// parses it as JSON; CEL has no JSON parser, so these read the exact
	// text sandbox-webhook writes (encoding/json's compact form).
	prevMem, prevLim, prevReq, prevConverted string
}

func podVariables(pr *program) *pod {
	p := &pod{}
	p.inits = pr.def("inits", "object.spec.?initContainers.orValue([])")
	p.apps = pr.def("apps", "object.spec.containers")
	p.ephemerals = pr.def("ephemerals", "object.spec.?ephemeralContainers.orValue([])")
	p.volumes = pr.def("volumes", "object.spec.?volumes.orValue([])")
	p.forbidsHostPath = pr.def("forbidsHostPath",
		fmt.Sprintf("namespaceObject.metadata.?labels[?%s].orValue('') in ['baseline', 'restricted']", str(psaapi.EnforceLevelLabel)))
	ann := pr.def("prevStatus", fmt.Sprintf("object.metadata.?annotations[?%s].orValue('')", str(mutate.StatusAnnotation)))
	prevOK := pr.def("prevOK", fmt.Sprintf("%s.startsWith('{') && %s.endsWith('}')", ann, ann))
	const memKey = `"podMemory":{"limit":"`
	p.prevMem = pr.def("prevMem", fmt.Sprintf("%s && %s.contains(%s)", prevOK, ann, str(memKey)))
	rest := fmt.Sprintf("%s.split(%s)[1].split('\"')", ann, str(memKey))
	p.prevLim = pr.def("prevLimit", fmt.Sprintf("%s ? %s[0] : ''", p.prevMem, rest))
	p.prevReq = pr.def("prevRequest", fmt.Sprintf("%s ? [%s].map(r, size(r) >= 5 && r[2] == 'request' ? r[4] : '')[0] : ''", p.prevMem, rest))
	boundQuantities(pr, p)
	const convKey = `"converted":[`
	p.prevConverted = pr.def("prevConverted", fmt.Sprintf(
		"%s && %s.contains(%s) ? %s.split(%s)[1].split(']')[0].split(',').map(n, n.substring(1, size(n) - 1)) : []",
		prevOK, ann, str(convKey), ann, str(convKey)))
	return p
}

// BoundedQuantity is the spelling of a quantity the exported policies
// read: at most 19 digits before the point and 18 after it, and a suffix
// or an exponent of at most 18. The apiserver's quantity() compares and
// converts quantities of different scales in arbitrary precision, with no
// deadline and outside CEL's cost budget: a memory limit of 1e10000000
// compared with another quantity holds the apiserver's core for seconds,
// and 0e1000000000 converted to an integer loops a billion times.
const BoundedQuantity = `^[+-]?[0-9]{0,19}(\.[0-9]{0,18})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?(1[0-8]|[0-9]))?$`

// refusedPath is the path of the JSONPatch operation that refuses a pod
// with a quantity not spelled as BoundedQuantity: not a JSON pointer, so no
// pod can make it apply, and it says why in the API server's error, as the
// policy's failurePolicy (Fail) rejects the pod.
const refusedPath = "sandbox-webhook refuses the pod: a memory quantity of the pod or of its status annotation is beyond what any node holds"

// boundQuantities makes the policy's first mutation refuse a pod whose
// memory quantities, or those of its status annotation, are not spelled as
// BoundedQuantity, before any mutation reads one with quantity(): the
// webhook refuses them too (mutate.UnboundedQuantity).
func boundQuantities(pr *program, p *pod) {
	mem := func(c string) string {
		return fmt.Sprintf("[%s.?resources.?limits.?memory.orValue(''), %s.?resources.?requests.?memory.orValue('')]", c, c)
	}
	strs := fmt.Sprintf("(%s + %s).map(c, %s).flatten() + %s + %s.map(v, v.?emptyDir.?sizeLimit.orValue('')) + [%s, %s]",
		p.inits, p.apps, mem("c"), mem("object.spec"), p.volumes, p.prevLim, p.prevReq)
	bounded := pr.def("quantitiesBounded", fmt.Sprintf("(%s).all(s, s == '' || s.matches(%s))", strs, str(BoundedQuantity)))
	pr.jsonPatch(fmt.Sprintf("%s ? [] : [JSONPatch{op: 'add', path: %s, value: 0}]", bounded, str(refusedPath)))
}

// quote is the CEL literal of a double quote, which opens and closes the
// JSON strings of the status annotation.
var quote = str(`"`)

// text returns static status text as a CEL literal of its JSON encoding;
// jsonString encloses it in quotes, opening and closing add only the quote
// that opens or closes a JSON string.
func text(s string) string       { return str(jsonText(s)) }
func jsonString(s string) string { return str(`"` + jsonText(s) + `"`) }
func opening(s string) string    { return str(`"` + jsonText(s)) }
func closing(s string) string    { return str(jsonText(s) + `"`) }

// volumeItem is a cache or an asset: a volume plus a mount in every selected
// container.
type volumeItem struct {
	name, mountPath string
	readOnly        bool
	cache           bool // a cache (emptyDir), not an asset
	// item is a CEL string expression: the item name in the status
	// ("cache/x", "asset/x:hostPath" or "asset/x:image").
	item string
	// literal is the CEL map literal of the volume.
	literal string
	// want is a CEL condition on a volume v: v is exactly the volume the
	// policy injects (the webhook compares with apiequality.Semantic).
	want func(v string) string

	// Variables.
	blocked, foreign, add, conflicts, injected, addVolume, existing string
}

// block compiles one SandboxPolicy.
type block struct {
	pr   *program
	pod  *pod
	p    *policy.Policy
	mode policy.Mode
	// pre prefixes the names of the block's variables: the policies of a
	// set compiled into one MAP each have their own.
	pre string
	// claims are the items of the policies compiled before this one into
	// the same MAP; nil when it is alone.
	claims claims
	// matched is a CEL condition: the policy selects the pod ("true" when
	// the MAP's match constraints and conditions select for it alone).
	matched string

	selInit, selApp, sel string
	// selects is a CEL condition on a container name: the policy's
	// container selector picks it.
	selects         func(name string) string
	volumes         []*volumeItem
	envAdd          []string // per env: the container names that get it
	envClaimed      []string // per env: an earlier policy holds it
	memory          *podMemory
	containerMemory string // CEL: the policy sets container-level memory ("" without)
	injected        []string
	skipped         []string
	// converts are the indices of the volumes the block moves to disk, when
	// it is alone in its MAP and in disk mode; a set's MAP converts in its
	// last mutation (conversion).
	converts string
}

// podMemory are the variables of pod-level memory.
type podMemory struct {
	// applied: the policy sets the pod-level memory (the pod does not set
	// its own, no earlier policy holds it).
	applied, write, limit, request, ownRequest string
}

// def defines a variable of the block, under its prefix.
func (b *block) def(name, expr string) string { return b.pr.def(b.pre+name, expr) }

// claims records which earlier policy of the same MAP would hold a volume
// name, a mount path, an env var or the pod-level memory: as in the webhook,
// an item belongs to the first policy (in name order) that declares it and
// selects the pod, unless an even earlier one holds one of its keys.
type claims map[string][]claim

// claim is an earlier policy's item: its policy and the CEL condition that
// it holds its keys.
type claim struct{ policy, holds string }

// claimed defines the variables of an item's claim: whether an earlier
// policy holds one of its keys (in the order the webhook checks them), and
// the reason the webhook gives; and registers the item as holding its keys
// when this policy selects the pod and nothing earlier holds them. Alone in
// its MAP, a policy's items are never claimed. Memory is one item, "memory",
// whatever its level (pod or containers), held by the first policy that
// sets it.
func (b *block) claimed(id string, keys ...string) (cond, why string) {
	cond, why = "false", "''"
	if b.claims == nil {
		return cond, why
	}
	var conds, reasons []string
	for _, k := range keys {
		for _, cl := range b.claims[k] {
			conds = append(conds, cl.holds)
			reasons = append(reasons, fmt.Sprintf("(%s ? [%s] : [])", cl.holds, text(fmt.Sprintf("%s is claimed by policy %q, which applies first", k, cl.policy))))
		}
	}
	if len(conds) > 0 {
		cond = b.def(id+"Claimed", or(conds...))
		why = b.def(id+"ClaimReason", paren(concat(reasons))+"[0]")
	}
	holds := b.def(id+"Holds", and(b.matched, not(cond)))
	for _, k := range keys {
		b.claims[k] = append(b.claims[k], claim{policy: b.p.Name(), holds: holds})
	}
	return cond, why
}

func newBlock(pr *program, pd *pod, p *policy.Policy, mode policy.Mode, pre string, cl claims) *block {
	b := &block{pr: pr, pod: pd, p: p, mode: mode, pre: pre, claims: cl, matched: "true"}
	cs := p.Spec.Containers
	b.selects = func(name string) string {
		excluded := "false"
		if len(cs.Exclude) > 0 {
			excluded = globsMatch(name, cs.Exclude)
		}
		return and(globsMatch(name, cs.Include), not(excluded))
	}
	all := b.selects("c.name")
	selected := func(list, name string) string {
		if all == "true" {
			return list
		}
		return b.def(name, fmt.Sprintf("%s.filter(c, %s)", list, all))
	}
	b.selInit = "[]"
	if *cs.InitContainers {
		b.selInit = selected(pd.inits, "selectedInit")
	}
	b.selApp = selected(pd.apps, "selectedApp")
	b.sel = b.def("selected", b.selInit+" + "+b.selApp)
	return b
}

// compile defines the policy's variables in the webhook's order: caches,
// assets, env, memory. The conversion of the pod's own memory-backed
// emptyDirs comes after every policy (convert, conversion).
func (b *block) compile() {
	for i, c := range b.p.Spec.Caches {
		b.cache(i, c)
	}
	for i, a := range b.p.Spec.Assets {
		b.asset(i, a)
	}
	for i, e := range b.p.Spec.Env {
		b.env(i, e)
	}
	if m := b.p.Spec.Memory; m != nil {
		if m.Level == policy.LevelContainer {
			b.containerLevelMemory()
		} else {
			b.podMemory()
		}
	}
}

// containerLevelMemory follows mutate's applier.containerMemory: unless an
// earlier policy holds the memory, every selected app container without a
// memory limit gets one, but not in a pod that sets its own pod-level memory
// (limit or request), which manages memory at the pod level: container
// limits added there could exceed its own.
func (b *block) containerLevelMemory() {
	claimed, why := b.claimed("memory", "memory")
	podOwn := b.def("podSetsMemory",
		"object.spec.?resources.?limits.?memory.orValue('') != '' || object.spec.?resources.?requests.?memory.orValue('') != ''")
	b.containerMemory = b.def("containerMemoryApplied", and(not(claimed), not(podOwn)))
	b.injected = append(b.injected, fmt.Sprintf("%s ? [%s] : []", b.containerMemory, jsonString("memory/containers")))
	skip := fmt.Sprintf("%s ? [%s] : []", podOwn, jsonString("memory/containers: the pod sets its own pod-level memory; kept"))
	if claimed != "false" {
		skip = fmt.Sprintf("%s ? [%s + %s + %s] : %s", claimed, opening("memory/containers: "), why, quote, skip)
	}
	b.skipped = append(b.skipped, skip)
}

func (b *block) cache(i int, c policy.Cache) {
	medium := ""
	if b.mode == policy.ModeMemory {
		medium = "Memory"
	}
	var fields []string
	if medium != "" {
		fields = append(fields, "'medium': "+str(medium))
	}
	size := ""
	if q := b.p.CacheSizes[i]; q != nil {
		size = q.String()
		fields = append(fields, "'sizeLimit': "+str(size))
	}
	v := &volumeItem{
		name:      c.Name,
		mountPath: c.MountPath,
		cache:     true,
		item:      str("cache/" + c.Name),
		literal:   fmt.Sprintf("{'name': dyn(%s), 'emptyDir': dyn({%s})}", str(c.Name), strings.Join(fields, ", ")),
		want: func(v string) string {
			sizeCond := fmt.Sprintf("!has(%s.emptyDir.sizeLimit)", v)
			if size != "" {
				sizeCond = fmt.Sprintf("has(%s.emptyDir.sizeLimit) && quantity(%s.emptyDir.sizeLimit).compareTo(quantity(%s)) == 0", v, v, str(size))
			}
			return exactly(v, "emptyDir", []string{"medium", medium}, sizeCond)
		},
	}
	b.volume(fmt.Sprintf("cache%d", i), v)
}

func (b *block) asset(i int, a policy.Asset) {
	v := &volumeItem{name: a.Name, mountPath: a.MountPath, readOnly: true}
	var hostPath, image *volumeItem
	if h := a.HostPath; h != nil {
		hostPath = &volumeItem{
			item:    str("asset/" + a.Name + ":hostPath"),
			literal: fmt.Sprintf("{'name': dyn(%s), 'hostPath': dyn({'path': %s, 'type': %s})}", str(a.Name), str(h.Path), str(h.Type)),
			want:    func(v string) string { return exactly(v, "hostPath", []string{"path", h.Path, "type", h.Type}) },
		}
	}
	if img := a.Image; img != nil {
		fields := []string{"'reference': " + str(img.Reference)}
		if img.PullPolicy != "" {
			fields = append(fields, "'pullPolicy': "+str(img.PullPolicy))
		}
		image = &volumeItem{
			item:    str("asset/" + a.Name + ":image"),
			literal: fmt.Sprintf("{'name': dyn(%s), 'image': dyn({%s})}", str(a.Name), strings.Join(fields, ", ")),
			want: func(v string) string {
				return exactly(v, "image", []string{"reference", img.Reference, "pullPolicy", img.PullPolicy})
			},
		}
	}
	switch {
	case hostPath != nil && image != nil:
		// The image source where the namespace's Pod Security level
		// forbids hostPath volumes.
		f := b.pod.forbidsHostPath
		v.item = fmt.Sprintf("(%s ? %s : %s)", f, image.item, hostPath.item)
		v.literal = fmt.Sprintf("(%s ? %s : %s)", f, image.literal, hostPath.literal)
		v.want = func(x string) string {
			return fmt.Sprintf("(%s ? %s : %s)", f, paren(image.want(x)), paren(hostPath.want(x)))
		}
	case hostPath != nil:
		// Injected even where Pod Security forbids it: a loud rejection
		// beats a silent zero reward (the webhook also warns).
		v.item, v.literal, v.want = hostPath.item, hostPath.literal, hostPath.want
	default:
		v.item, v.literal, v.want = image.item, image.literal, image.want
	}
	b.volume(fmt.Sprintf("asset%d", i), v)
}

// exactly returns the CEL condition that the volume v has only a name and
// the source, whose string fields (pairs of key and value, "" for absent)
// are those given, and the further conditions hold.
func exactly(v, source string, fields []string, more ...string) string {
	conds := []string{fmt.Sprintf("%s.all(k, k in ['name', '%s'])", v, source), fmt.Sprintf("has(%s.%s)", v, source)}
	for i := 0; i < len(fields); i += 2 {
		conds = append(conds, fmt.Sprintf("%s.%s.?%s.orValue('') == %s", v, source, fields[i], str(fields[i+1])))
	}
	return and(append(conds, more...)...)
}

// volume defines the variables of one volume item, following
// mutate's applier.volume.
func (b *block) volume(id string, v *volumeItem) {
	pd := b.pod
	if strings.HasPrefix(v.item, "(") {
		v.item = b.def(id+"Item", v.item)
	}
	claimed, why := b.claimed(id, "volume/"+v.name, "path/"+v.mountPath)
	v.existing = b.def(id+"Existing", fmt.Sprintf("%s.filter(v, v.name == %s)", pd.volumes, str(v.name)))
	v.blocked = b.def(id+"Blocked", or(claimed, fmt.Sprintf("size(%s) > 0 && !%s", v.existing, paren(v.want(v.existing+"[0]")))))
	mp := str(v.mountPath)
	// The pod mounts the volume other than the policy does (mutate's
	// foreignReference): nothing is injected.
	ro := ""
	if v.readOnly {
		ro = " || !m.?readOnly.orValue(false)"
	}
	foreignMount := fmt.Sprintf("c.?volumeMounts.orValue([]).exists(m, m.name == %s && (m.mountPath != %s%s || "+
		"m.?subPath.orValue('') != '' || m.?subPathExpr.orValue('') != '' || m.?mountPropagation.orValue('None') != 'None')) || "+
		"c.?volumeDevices.orValue([]).exists(d, d.name == %s)", str(v.name), mp, ro, str(v.name))
	v.foreign = b.def(id+"Foreign", fmt.Sprintf("!%s && (%s.exists(c, %s) || %s.exists(c, %s) || %s.exists(c, %s))",
		v.blocked, pd.inits, foreignMount, pd.apps, foreignMount, pd.ephemerals, foreignMount))
	stop := fmt.Sprintf("(%s || %s)", v.blocked, v.foreign)
	// Mount paths compare as mutate's normMountPath reads them: without
	// empty and "." components; one with a ".." component is near any path.
	norm := "('/' + m.mountPath.split('/').filter(s, s != '' && s != '.').join('/'))"
	dotdot := "m.mountPath.split('/').exists(s, s == '..')"
	at := fmt.Sprintf("(!%s && %s == %s)", dotdot, norm, mp)
	near := fmt.Sprintf("(%s || %s == '/' || %s.startsWith(%s) || %s.startsWith(%s + '/'))", dotdot, norm, norm, str(v.mountPath+"/"), mp, norm)
	mounts := "c.?volumeMounts.orValue([])"
	v.conflicts = b.def(id+"Conflicts", fmt.Sprintf(
		"%s ? [] : %s.filter(c, %s.exists(m, %s && m.name != %s) || !%s.exists(m, %s) && %s.exists(m, %s)).map(c, "+
			"%s + %s + '[' + c.name + %s + c.name + %s + "+
			"(c.volumeMounts.exists(m, %s) ? c.volumeMounts.filter(m, %s)[0].name + %s : c.volumeMounts.filter(m, %s)[0].name + %s))",
		stop, b.sel, mounts, at, str(v.name), mounts, at, mounts, near,
		quote, v.item, text(`]: container "`), text(`" already mounts volume "`),
		at, at, closing(`" at `+v.mountPath+`; kept`), near, closing(`" under or above `+v.mountPath+`; kept`)))
	v.add = b.def(id+"Mount", fmt.Sprintf("%s ? [] : %s.filter(c, !%s.exists(m, %s || %s)).map(c, c.name)",
		stop, b.sel, mounts, at, near))
	v.injected = b.def(id+"Injected", fmt.Sprintf("!%s && size(%s) > size(%s)", stop, b.sel, v.conflicts))
	v.addVolume = b.def(id+"AddVolume", fmt.Sprintf("%s && size(%s) == 0", v.injected, v.existing))

	entry := func(reason string) string { return fmt.Sprintf("[%s + %s + %s]", quote, v.item, closing(": "+reason)) }
	skipped := ""
	if claimed != "false" {
		skipped = fmt.Sprintf("%s ? [%s + %s + ': ' + %s + %s] : ", claimed, quote, v.item, why, quote)
	}
	how := "at " + v.mountPath
	if v.readOnly {
		how = "read-only " + how
	}
	foreignWhy := fmt.Sprintf("the pod mounts volume %q other than %s, whole and without propagation; ", v.name, how)
	// No container can mount it: reported whether or not the pod has an
	// identical volume.
	b.skipped = append(b.skipped, skipped+fmt.Sprintf("%s ? %s : %s ? (size(%s) == 0 ? %s : %s) : size(%s) == 0 ? %s : %s + (%s ? [] : %s)",
		v.blocked, entry(fmt.Sprintf("the pod already has a volume named %q; the pod's own is kept", v.name)),
		v.foreign, v.existing,
		entry(foreignWhy+"not injected; the apiserver rejects the mount of an undeclared volume"),
		entry(foreignWhy+"nothing more is mounted"),
		b.sel, entry("no container is selected"),
		v.conflicts,
		v.injected, entry("every selected container already mounts something at "+v.mountPath)))
	b.injected = append(b.injected, fmt.Sprintf("%s ? [%s + %s + %s] : []", v.injected, quote, v.item, quote))
	b.volumes = append(b.volumes, v)
}

func (b *block) env(i int, e policy.EnvVar) {
	id := fmt.Sprintf("env%d", i)
	name := str(e.Name)
	item := "env/" + e.Name
	claimed, why := b.claimed(id, item)
	b.envClaimed = append(b.envClaimed, claimed)
	sel, skipEmpty := b.sel, jsonString(item+": no container is selected")
	if claimed != "false" {
		sel = fmt.Sprintf("(%s ? [] : %s)", claimed, b.sel)
		skipEmpty = fmt.Sprintf("%s ? %s + %s + %s : %s", claimed, opening(item+": "), why, quote, skipEmpty)
	}
	has := fmt.Sprintf("c.?env.orValue([]).exists(x, x.name == %s)", name)
	b.envAdd = append(b.envAdd, b.def(id+"Add", fmt.Sprintf("%s.filter(c, !%s).map(c, c.name)", sel, has)))
	b.injected = append(b.injected, fmt.Sprintf("size(%s) > 0 ? [%s] : []", sel, jsonString(item)))
	kept := "[]"
	if e.OnConflict != policy.Override {
		// The pod's own value is kept (onConflict: keep): reported per
		// container, unless it already is the policy's.
		kept = b.def(id+"Kept", fmt.Sprintf(
			"%s.filter(c, %s && [c.env.filter(x, x.name == %s)[0]].exists(x, has(x.valueFrom) || x.?value.orValue('') != %s)).map(c, "+
				"%s + c.name + %s + c.name + %s)",
			sel, has, name, str(e.Value),
			opening(item+"["), text(`]: container "`), closing(fmt.Sprintf(`" sets its own %s; kept (onConflict: keep)`, e.Name))))
	}
	b.skipped = append(b.skipped, fmt.Sprintf("size(%s) == 0 ? [%s] : %s", sel, skipEmpty, kept))
}

// podMemory follows mutate's applier.memory: the pod-level limit is the
// headroom raised to the largest container limit and to the request; the
// request is the containers' effective request as the apiserver computes it
// (KEP-753: init containers, native sidecars, limits standing in for missing
// requests), at least the policy's minimum; the pod's own values are kept.
func (b *block) podMemory() {
	pd := b.pod
	claimed, why := b.claimed("memory", "memory")
	headroom, minimum := b.p.MemoryLimit, b.p.MemoryRequest
	hv, _ := headroom.AsInt64()
	mv, _ := minimum.AsInt64()

	lim := b.def("podLimit", "object.spec.?resources.?limits.?memory.orValue('')")
	req := b.def("podRequest", "object.spec.?resources.?requests.?memory.orValue('')")
	sameQ := func(a, b string) string {
		return fmt.Sprintf("isQuantity(%s) && quantity(%s).compareTo(quantity(%s)) == 0", b, a, b)
	}
	// Values an earlier pass set (recorded in the status annotation) are
	// recomputed; values the pod author set are kept.
	ours := b.def("memoryOurs", and(pd.prevMem, lim+" != ''", sameQ(lim, pd.prevLim),
		or(pd.prevReq+" == ''", and(req+" != ''", sameQ(req, pd.prevReq)))))
	kept := b.def("memoryKept", and(not(claimed), fmt.Sprintf("%s != '' && !%s", lim, ours)))
	ownReq := b.def("memoryOwnRequest", and(req+" != ''", or(not(ours), pd.prevReq+" == ''")))

	effective := "c.?resources.?requests.?memory.orValue(c.?resources.?limits.?memory.orValue(''))"
	initReqs := b.def("initRequests", fmt.Sprintf("%s.map(c, %s)", pd.inits, effective))
	initSide := b.def("initSidecar", fmt.Sprintf("%s.map(c, c.?restartPolicy.orValue('') == 'Always')", pd.inits))
	sidecars := func(n string) string {
		return fmt.Sprintf("lists.range(%s).filter(j, %s[j] && %s[j] != '').map(j, %s[j])", n, initSide, initReqs, initReqs)
	}
	// Each init container's requirement while it runs: its request plus
	// the sidecars started before it (a sidecar: the sidecars up to it).
	// Lists of quantities, summed later, so the sum's format can be that
	// of its first non-zero term, as resource.Quantity.Add keeps it.
	cands := b.def("initCandidates", fmt.Sprintf(
		"lists.range(size(%s)).map(i, %s[i] ? %s : (%s[i] != '' ? [%s[i]] : []) + %s).filter(l, size(l) > 0)",
		pd.inits, initSide, sidecars("i + 1"), initReqs, initReqs, sidecars("i")))
	sum := func(l string) string { return fmt.Sprintf("%s.map(s, quantity(s).asInteger()).sum()", l) }
	candVals := b.def("initCandidateValues", fmt.Sprintf("%s.map(l, %s)", cands, sum("l")))
	running := b.def("runningRequests", fmt.Sprintf("%s.map(c, %s).filter(s, s != '') + %s", pd.apps, effective, sidecars("size("+pd.inits+")")))
	winner := b.def("effectiveTerms", fmt.Sprintf(
		"size(%s) > 0 && (size(%s) == 0 || %s.max() > %s) ? %s[%s.indexOf(%s.max())] : %s",
		cands, running, candVals, sum(running), cands, candVals, candVals, running))
	aggVal := b.def("effectiveValue", sum(winner))
	nonZero := fmt.Sprintf("%s.filter(s, quantity(s).asInteger() != 0)", winner)
	aggStr := b.def("effectiveRequest", formatQuantity(aggVal,
		fmt.Sprintf("[%s].map(nz, size(nz) > 0 ? %s : 'bin')[0]", nonZero, quantityClass("nz[0]"))))

	reqVal, reqStr := aggVal, aggStr
	if mv > 0 {
		reqVal = fmt.Sprintf("(%d > %s ? %d : %s)", mv, aggVal, mv, aggVal)
		reqStr = fmt.Sprintf("(%d > %s ? %s : %s)", mv, aggVal, str(minimum.String()), aggStr)
	}
	reqVal = b.def("requestValue", fmt.Sprintf("%s ? quantity(%s).asInteger() : %s", ownReq, req, reqVal))
	reqStr = b.def("requestString", fmt.Sprintf("%s ? %s : %s", ownReq, b.def("podRequestCanonical", canonicalQuantity(req)), reqStr))
	limStrs := b.def("containerLimits", fmt.Sprintf("(%s + %s).map(c, c.?resources.?limits.?memory.orValue('')).filter(s, s != '')", pd.inits, pd.apps))
	limVals := b.def("containerLimitValues", fmt.Sprintf("%s.map(s, quantity(s).asInteger())", limStrs))
	maxLim := b.def("maxContainerLimit", fmt.Sprintf("size(%s) > 0 ? %s.max() : 0", limVals, limVals))
	maxLimStr := b.def("maxContainerLimitCanonical", canonicalQuantity(fmt.Sprintf("%s[%s.indexOf(%s)]", limStrs, limVals, maxLim)))
	lim1Val := fmt.Sprintf("(%s > %d ? %s : %d)", maxLim, hv, maxLim, hv)
	lim1Str := fmt.Sprintf("(%s > %d ? %s : %s)", maxLim, hv, maxLimStr, str(headroom.String()))
	limVal := b.def("limitValue", fmt.Sprintf("%s > %s ? %s : %s", reqVal, lim1Val, reqVal, lim1Val))
	limStr := b.def("limitString", fmt.Sprintf("%s > %s ? %s : %s", reqVal, lim1Val, reqStr, lim1Str))
	applied := and(not(claimed), not(kept))
	if applied != not(kept) {
		applied = b.def("memoryApplied", applied)
	}
	write := b.def("memoryWrite", and(applied, or(lim+" == ''", req+" == ''",
		fmt.Sprintf("quantity(%s).asInteger() != %s", lim, limVal), fmt.Sprintf("quantity(%s).asInteger() != %s", req, reqVal))))
	b.memory = &podMemory{applied: applied, write: write, limit: limStr, request: reqStr, ownRequest: ownReq}

	b.injected = append(b.injected, fmt.Sprintf("%s ? [%s] : []", applied, jsonString("memory/pod")))
	if claimed != "false" {
		b.skipped = append(b.skipped, fmt.Sprintf("%s ? [%s + %s + %s] : []", claimed, opening("memory/pod: "), why, quote))
	}
	b.skipped = append(b.skipped, fmt.Sprintf("%s ? [%s + %s + %s] : []",
		kept, opening("memory/pod: the pod sets its own pod-level memory limit ("), b.def("podLimitCanonical", canonicalQuantity(lim)), closing("); kept")))
}

// keeps returns the CEL condition that keepMemoryVolumes names the volume v
// (by name, or by a mount at one of its paths in any container).
func (b *block) keeps(v string) string {
	pd := b.pod
	var keeps []string
	for _, ref := range b.p.Spec.KeepMemoryVolumes {
		if ref.Name != "" {
			keeps = append(keeps, fmt.Sprintf("%s.name == %s", v, str(ref.Name)))
		}
		if ref.MountPath != "" {
			keeps = append(keeps, fmt.Sprintf("(%s + %s).exists(c, c.?volumeMounts.orValue([]).exists(m, m.mountPath == %s && m.name == %s.name))",
				pd.inits, pd.apps, str(ref.MountPath), v))
		}
	}
	return or(keeps...)
}

// memoryEmptyDir is the CEL condition that the volume v is a memory-backed
// emptyDir.
const memoryEmptyDir = "has(v.emptyDir) && v.emptyDir.?medium.orValue('') == 'Memory'"

// convert follows mutate's applier.convert for a disk-mode policy alone in
// its MAP: the pod's own memory-backed emptyDirs move to disk, except those
// keepMemoryVolumes names and those named like one of its caches or assets.
// Such a volume is that item's, whether the policy injects it or skips it
// (the pod has a different volume of that name, no container can mount it):
// the pod keeps its own whole, medium included. The mounts its block adds
// are of its own volumes, so the pod as it arrives keeps by mount path what
// the pod after its injections would.
func (b *block) convert() {
	pd := b.pod
	keep := b.keeps("v")
	own := memoryEmptyDir
	if len(b.volumes) > 0 {
		names := each(b.volumes, func(v *volumeItem) string { return str(v.name) })
		own = and(own, fmt.Sprintf("!(v.name in [%s])", strings.Join(names, ", ")))
	}
	b.converts = b.def("convertIndices", fmt.Sprintf("lists.range(size(%s)).filter(i, [%s[i]].all(v, %s && !%s))",
		pd.volumes, pd.volumes, own, paren(keep)))
	b.skipped = append(b.skipped, fmt.Sprintf("%s.filter(v, %s && %s).map(v, %s + v.name + %s)",
		pd.volumes, own, paren(keep), opening("convert/"), closing(": kept on tmpfs by keepMemoryVolumes")))
}

// conversion follows mutate's conversion for the policies of a set compiled
// into one MAP: after every policy has injected, the first disk-mode policy
// (in name order) that selects the pod decides about each of the pod's own
// memory-backed emptyDirs: those its keepMemoryVolumes names stay on tmpfs
// and are recorded as skipped in its status entry, the rest move to disk. A
// later disk-mode policy neither converts nor records anything, so a second
// pass, which finds the same first policy and the converted volumes on
// disk, decides the same. A memory-backed emptyDir named like a cache or an
// asset whose volume name a policy claims (cl: the first policy that
// declares the name and selects the pod, unless an even earlier one holds
// the name or the mount path) is that item's and stays, whether the policy
// injected it or kept the pod's own: the pod keeps its own whole, medium
// included. Its variables are read in the MAP's last mutation, on the pod
// after every policy's mutation, as the webhook reads the pod after every
// policy's apply.
//
// It returns the indices of the volumes to move to disk and, per block, the
// CEL list of the skipped items to append to its status entry ("[]" for a
// block that keeps nothing).
func conversion(pr *program, pd *pod, blocks []*block, cl claims) (converts string, kept []string) {
	// The volume names a policy claims, each once, in the order the
	// policies declare them.
	var names []string
	seen := map[string]bool{}
	for _, b := range blocks {
		for _, v := range b.volumes {
			if seen[v.name] {
				continue
			}
			seen[v.name] = true
			holds := each(cl["volume/"+v.name], func(c claim) string { return c.holds })
			names = append(names, fmt.Sprintf("%s ? [%s] : []", or(holds...), str(v.name)))
		}
	}
	tmpfs := memoryEmptyDir
	if len(names) > 0 {
		tmpfs = and(tmpfs, fmt.Sprintf("!(v.name in %s)", pr.def("volumesClaimed", concat(names))))
	}
	// own: the indices of the pod's own memory-backed emptyDirs that no
	// policy's cache or asset names, not yet on disk.
	own := pr.def("tmpfsOwn", fmt.Sprintf("lists.range(size(%s)).filter(i, [%s[i]].all(v, %s))",
		pd.volumes, pd.volumes, tmpfs))
	kept = make([]string, len(blocks))
	var (
		earlier []string // the matches of the disk-mode blocks before
		moves   []string // per disk-mode block: when it decides, what it moves
	)
	for k, b := range blocks {
		kept[k] = "[]"
		if b.mode != policy.ModeDisk {
			continue
		}
		// The policy decides when it selects the pod and no disk-mode
		// policy before it does.
		decides := and(b.matched, not(or(earlier...)))
		earlier = append(earlier, b.matched)
		keep := b.keeps("v")
		if keep == "false" {
			moves = append(moves, fmt.Sprintf("%s ? %s", b.matched, own))
			continue
		}
		keeps := b.def("tmpfsKept", fmt.Sprintf("%s.filter(i, [%s[i]].all(v, %s))", own, pd.volumes, keep))
		moves = append(moves, fmt.Sprintf("%s ? %s.filter(i, !(i in %s))", b.matched, own, keeps))
		kept[k] = b.def("statusKept", fmt.Sprintf("%s ? %s.map(i, %s + %s[i].name + %s) : []",
			decides, keeps, opening("convert/"), pd.volumes, closing(": kept on tmpfs by keepMemoryVolumes")))
	}
	if len(moves) == 0 {
		return "", kept // no disk-mode policy
	}
	// The first disk-mode policy that selects the pod moves what it does
	// not keep; none selecting it, nothing moves.
	converts = pr.def("convertIndices", strings.Join(append(moves, "[]"), " : "))
	return converts, kept
}
