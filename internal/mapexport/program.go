package mapexport

import (
	"fmt"

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

// memoryEmptyDir is the CEL condition that the volume v is a memory-backed
// emptyDir.
const memoryEmptyDir = "has(v.emptyDir) && v.emptyDir.?medium.orValue('') == 'Memory'"
