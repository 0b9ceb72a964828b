package kyvernoimport

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// policyConverter converts the rules of one Kyverno policy.
type policyConverter struct {
	source, label string
	namespace     string // a namespaced Policy's namespace
	res           *Result
}

// Spec fields of a Kyverno policy that say how Kyverno runs it, not what a
// pod becomes: left to Kyverno, with nothing to convert.
var runtimeSpecFields = map[string]bool{
	"background": true, "validationFailureAction": true, "validationFailureActionOverrides": true,
	"failurePolicy": true, "webhookTimeoutSeconds": true, "schemaValidation": true,
	"mutateExistingOnPolicyUpdate": true, "generateExisting": true, "generateExistingOnPolicyUpdate": true,
	"useServerSideApply": true, "emitWarning": true, "applyRules": true,
}

func (c *policyConverter) refuse(rule string, path *field.Path, reason string) {
	c.res.Refused = append(c.res.Refused, Finding{Source: c.source, Policy: c.label, Rule: rule, Path: pathString(path), Reason: reason})
}

func pathString(p *field.Path) string {
	if p == nil {
		return ""
	}
	return p.String()
}

func (c *policyConverter) convert(name string, doc map[string]any) []*converted {
	spec, _ := doc["spec"].(map[string]any)
	specPath := field.NewPath("spec")
	if admission, ok := spec["admission"].(bool); ok && !admission {
		c.refuse("", specPath.Child("admission"), "the policy is not applied at admission (admission: false); there is nothing for a webhook to replace")
		return nil
	}
	var policyLeftOut []Finding
	for _, k := range sortedKeys(spec) {
		if k == "rules" || k == "admission" || runtimeSpecFields[k] {
			continue
		}
		policyLeftOut = append(policyLeftOut, Finding{Source: c.source, Policy: c.label, Path: specPath.Child(k).String(),
			Reason: "not converted: a policy setting this import does not know"})
	}
	rules, _ := spec["rules"].([]any)
	if len(rules) == 0 {
		c.refuse("", specPath.Child("rules"), "the policy has no rules")
		return nil
	}
	var rcs []*ruleConverter
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		rc := &ruleConverter{policyConverter: c, path: specPath.Child("rules").Index(i)}
		rc.name, _ = rule["name"].(string)
		if rc.name == "" {
			rc.name = fmt.Sprintf("#%d", i+1)
		}
		var ok bool
		if rc.m, rc.inj, ok = rc.convert(rule); ok {
			rcs = append(rcs, rc)
		}
	}
	pairInit(rcs)
	for _, rc := range rcs {
		if rc.pairedInto != nil {
			continue
		}
		rc.inj.check(rc)
		if mem := rc.inj.memory; mem != nil && mem.Level == policy.LevelPod && mem.Limit != "" && mem.Request == "" {
			rc.proposeRequest(rc.inj)
		}
		if !rc.inj.empty() {
			key, _ := json.Marshal(struct {
				M policy.Match
				S policy.Spec
			}{rc.m, rc.inj.spec()})
			rc.key = string(key)
		}
	}
	findDuplicates(rcs)
	for _, rc := range rcs {
		if rc.workloads != nil && (rc.duplicateOf == nil || rc.duplicateOf.workloads != nil) && !rc.inj.empty() {
			rc.differs(rc.path.Child("match"), fmt.Sprintf("matches %s only: Kyverno mutates their pod templates, at their create and update; "+
				"the SandboxPolicy mutates every pod its match selects at the pod's creation, bare pods and those of other controllers included", strings.Join(rc.workloads, ", ")))
		}
		c.res.Rules++
		if len(rc.leftOut) == 0 {
			c.res.Converted++
			if len(rc.differ) > 0 {
				c.res.ConvertedWithDifference++
			}
		}
		c.res.LeftOut = append(c.res.LeftOut, rc.leftOut...)
		c.res.Differences = append(c.res.Differences, rc.differ...)
	}
	c.res.LeftOut = append(c.res.LeftOut, policyLeftOut...)
	groups := groupRules(rcs)
	var out []*converted
	for i, g := range groups {
		if g.inj.empty() {
			continue // nothing of it converted: the findings say why
		}
		n := name
		if i > 0 && len(g.rules) > 0 {
			n = name + "-" + sanitize(g.rules[0])
		}
		sp := policy.SandboxPolicy{Metadata: policy.Metadata{Name: n}}
		sp.APIVersion, sp.Kind = policy.APIVersion, policy.Kind
		sp.Spec = g.inj.spec()
		sp.Spec.Match = g.match
		out = append(out, &converted{
			Converted:   Converted{Policy: sp, From: []Origin{{Source: c.source, Policy: c.label, Rules: g.rules}}, Notes: g.notes},
			kyvernoName: name,
		})
	}
	return out
}

// group is the rules of one policy that become one SandboxPolicy.
type group struct {
	key   string
	match policy.Match
	inj   *injection
	rules []string
	notes []string
}

// groupRules joins consecutive rules of the same match whose parts do not
// contest each other; a rule merged into another (an init-container pair,
// a duplicate) is named with the group of the rule it joined.
func groupRules(rcs []*ruleConverter) []*group {
	var groups []*group
	of := map[*ruleConverter]*group{}
	for _, rc := range rcs {
		if rc.pairedInto != nil || rc.duplicateOf != nil {
			continue
		}
		inj := rc.inj
		// Only a rule that injects something is named where the policy
		// came from.
		contributes := !inj.empty()
		sel := selectionOf(inj)
		key, _ := json.Marshal(struct {
			M        policy.Match
			I        bool
			Inc, Exc []string
		}{rc.m, inj.init, sel.include, sel.exclude})
		if n := len(groups); n > 0 && groups[n-1].key == string(key) && groups[n-1].inj.compatible(inj) {
			g := groups[n-1]
			g.inj.add(inj)
			if contributes {
				g.rules = append(g.rules, rc.name)
			}
			g.notes = append(g.notes, rc.notes...)
			of[rc] = g
			continue
		}
		g := &group{key: string(key), match: rc.m, inj: inj, notes: rc.notes}
		if contributes {
			g.rules = []string{rc.name}
		}
		if n := len(groups); n > 0 && contributes {
			why := "selects other pods or containers (its match, exclude, init-container choice or container names differ)"
			if groups[n-1].key == string(key) {
				why = "injects what the rules before it contest (the same volume, mount path or env name otherwise)"
			}
			g.notes = append(g.notes, fmt.Sprintf("a SandboxPolicy of its own: rule %s %s, and a SandboxPolicy has one match and one of each item", rc.name, why))
		}
		groups = append(groups, g)
		of[rc] = g
	}
	for _, rc := range rcs {
		into := cmp.Or(rc.pairedInto, rc.duplicateOf)
		if into == nil {
			continue
		}
		// A rule paired with one that another duplicates joins that one.
		g := of[cmp.Or(into.duplicateOf, into)]
		g.rules = append(g.rules, rc.name)
		g.notes = append(g.notes, rc.notes...)
		switch {
		case rc.pairedInto != nil:
			g.notes = append(g.notes, fmt.Sprintf("rules %s and %s put the same mounts, env and image rewrites into the app containers and the init containers: one SandboxPolicy, its init containers included", into.name, rc.name))
		case rc.workloads != nil && into.workloads == nil:
			g.notes = append(g.notes, fmt.Sprintf("rule %s is rule %s for the pod templates of %s (as Kyverno's auto-generated rules are): the webhook mutates the pods they create with rule %s's items; converted once",
				rc.name, into.name, strings.Join(rc.workloads, ", "), into.name))
		default:
			g.notes = append(g.notes, fmt.Sprintf("rule %s does what rule %s does to the same pods: converted once", rc.name, into.name))
		}
	}
	return groups
}

// findDuplicates marks each rule that converts to what another rule of the
// policy converts to, the same match and items, as its duplicate: Kyverno's
// rules for the workloads' pod templates (auto-generated, autogen-…, or
// written out) do what the rule for Pods does, to the same pods. The rule
// for Pods is the one kept, or else the first.
func findDuplicates(rcs []*ruleConverter) {
	first := map[string]*ruleConverter{}
	for _, rc := range rcs {
		if rc.key == "" {
			continue
		}
		if o, ok := first[rc.key]; !ok || o.workloads != nil && rc.workloads == nil {
			first[rc.key] = rc
		}
	}
	for _, rc := range rcs {
		if o := first[rc.key]; rc.key != "" && o != rc {
			rc.duplicateOf = o
		}
	}
}

// sanitize makes a rule name fit a policy name.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// ruleConverter converts one rule.
type ruleConverter struct {
	*policyConverter
	name    string
	path    *field.Path
	leftOut []Finding
	differ  []Finding
	notes   []string

	// podPath leads from the matched object to the pod spec the patch
	// edits; workloads are the kinds of a rule that matches workloads
	// only, which edits their pod template.
	podPath   []string
	workloads []string
	// foreachSel is the selection of the foreach entry being read.
	foreachSel selection
	// ifInit is the path of a precondition that the pod has init
	// containers; nil without one.
	ifInit *field.Path

	m   policy.Match
	inj *injection
	// key is the rule's match and items, to tell duplicates; pairedInto
	// and duplicateOf name the rule it merged into.
	key                     string
	pairedInto, duplicateOf *ruleConverter
}

// leave records a part of the rule that is not converted.
func (r *ruleConverter) leave(path *field.Path, reason string) {
	r.leftOut = append(r.leftOut, Finding{Source: r.source, Policy: r.label, Rule: r.name, Path: pathString(path), Reason: reason})
}

// proposeRequest makes the pod-level memory request a decision. Kyverno set
// only the limit, so the API server defaulted the request to it and every
// sandbox reserved the whole headroom; the webhook sets the request
// explicitly, to the containers' (often 0) unless the policy says more.
// The import proposes what the rule's in-memory caches can hold, memory
// the sandbox uses once they fill, and says so.
func (r *ruleConverter) proposeRequest(inj *injection) {
	var sum resource.Quantity
	for _, v := range inj.volumes {
		if v.medium != "Memory" || v.sizeLimit == "" {
			continue
		}
		if q, err := resource.ParseQuantity(v.sizeLimit); err == nil && mutate.Bounded(q) {
			sum.Add(q)
		}
	}
	mem := inj.memory
	msg := fmt.Sprintf("a pod-level memory limit without a request: the API server defaulted the request to the limit (%s), so every sandbox reserved it; "+
		"sandbox-webhook sets the request to the containers' requests (0 for containers without one) unless memory.request says more", mem.Limit)
	if sum.Sign() > 0 {
		mem.Request = sum.String()
		msg += fmt.Sprintf("; proposed memory.request %s, what the in-memory caches hold: set it to what a sandbox uses", mem.Request)
	} else {
		msg += "; set memory.request to what a sandbox uses"
	}
	r.differs(r.path.Child("mutate"), msg)
}

// differs records a part of the rule converted with a difference the
// reader should know.
func (r *ruleConverter) differs(path *field.Path, reason string) {
	r.differ = append(r.differ, Finding{Source: r.source, Policy: r.label, Rule: r.name, Path: pathString(path), Reason: reason})
}

// Rule fields that say how Kyverno reports or runs the rule.
var runtimeRuleFields = map[string]bool{"name": true, "skipBackgroundRequests": true, "reportProperties": true, "imageExtractors": true}

// convert returns the rule's match and what it injects; ok is false when
// the rule is refused whole (and said why).
func (r *ruleConverter) convert(rule map[string]any) (policy.Match, *injection, bool) {
	for _, kind := range []string{"validate", "generate", "verifyImages"} {
		if _, ok := rule[kind]; ok {
			r.refuse(r.name, r.path.Child(kind), "a "+kind+" rule, not a mutation: sandbox-webhook only mutates pods; keep it in Kyverno (or a ValidatingAdmissionPolicy)")
			return policy.Match{}, nil, false
		}
	}
	mutate, ok := rule["mutate"].(map[string]any)
	if !ok {
		r.refuse(r.name, r.path.Child("mutate"), "the rule has no mutate block")
		return policy.Match{}, nil, false
	}
	for _, k := range []string{"context", "celPreconditions"} {
		if _, ok := rule[k]; ok {
			r.refuse(r.name, r.path.Child(k), "the rule reads variables (context, JMESPath or CEL) that a SandboxPolicy cannot express; a policy decides on the pod's labels, namespace and containers only")
			return policy.Match{}, nil, false
		}
	}
	for _, k := range []string{"mutateExisting", "targets"} {
		if _, ok := mutate[k]; ok {
			r.refuse(r.name, r.path.Child("mutate", k), "mutates existing resources; sandbox-webhook patches pods only at their CREATE")
			return policy.Match{}, nil, false
		}
	}
	if !r.preconditions(rule["preconditions"], r.path.Child("preconditions")) {
		return policy.Match{}, nil, false
	}
	m, ok := r.match(rule)
	if !ok {
		return policy.Match{}, nil, false
	}
	for _, k := range sortedKeys(rule) {
		switch {
		case k == "match" || k == "exclude" || k == "preconditions" || k == "mutate" || runtimeRuleFields[k]:
		default:
			r.leave(r.path.Child(k), "not converted: a rule field this import does not know")
		}
	}
	inj := newInjection()
	mp := r.path.Child("mutate")
	for _, k := range sortedKeys(mutate) {
		switch k {
		case "patchStrategicMerge":
			p, _ := mutate[k].(map[string]any)
			r.pod(inj, p, mp.Child(k), nil)
		case "patchesJson6902":
			r.jsonPatch(inj, mutate[k], mp.Child(k), nil)
		case "foreach":
			r.foreach(inj, mutate[k], mp.Child(k))
		default:
			r.leave(mp.Child(k), "not converted: a mutation this import does not know")
		}
	}
	if !r.initOnly(inj) {
		return policy.Match{}, nil, false
	}
	return m, inj, true
}

// preconditions accepts only checks of the operation that admit CREATE:
// sandbox-webhook mutates at CREATE only, so they change nothing.
func (r *ruleConverter) preconditions(v any, path *field.Path) bool {
	if v == nil {
		return true
	}
	var conds []any
	var condPath *field.Path
	switch p := v.(type) {
	case []any: // the legacy form: every condition must hold
		conds, condPath = p, path
	case map[string]any:
		for _, k := range sortedKeys(p) {
			list, _ := p[k].([]any)
			if (k != "all" && k != "any") || (k == "any" && len(list) > 1) {
				r.refuse(r.name, path.Child(k), "preconditions other than a check of the operation cannot be expressed in a SandboxPolicy")
				return false
			}
			conds, condPath = append(conds, list...), path.Child(k)
		}
	}
	for i, c := range conds {
		if hasInitContainers(c) {
			r.ifInit = condPath.Index(i)
			continue
		}
		if !createCheck(c) {
			r.refuse(r.name, condPath.Index(i), "a precondition other than a check of the operation (that admits CREATE) cannot be expressed in a SandboxPolicy")
			return false
		}
	}
	return true
}

// hasInitContainers reports whether cond checks that the pod has init
// containers, as Kyverno's replace-image-registry sample guards its rule
// for them: {{ request.object.spec.initContainers[] || `[]` | length(@) }}
// at least 1.
func hasInitContainers(cond any) bool {
	m, ok := cond.(map[string]any)
	if !ok || len(m) != 3 {
		return false
	}
	key, _ := m["key"].(string)
	if strings.ReplaceAll(key, " ", "") != "{{request.object.spec.initContainers[]||`[]`|length(@)}}" {
		return false
	}
	op, _ := m["operator"].(string)
	v := scalar(m["value"])
	return op == "GreaterThanOrEquals" && v == "1" || op == "GreaterThan" && v == "0"
}

// initOnly refuses a rule guarded by a check of the pod's init containers
// that does more than rewrite their images: the check changes nothing only
// for a rule that rewrites the init containers' images alone.
func (r *ruleConverter) initOnly(inj *injection) bool {
	if r.ifInit == nil {
		return true
	}
	other := !inj.place.empty() || len(inj.volumes) > 0 || len(inj.mounts) > 0 || len(inj.env) > 0 || inj.memory != nil || inj.shm != nil || inj.disk != nil ||
		slices.ContainsFunc(inj.mirrors, func(m mirror) bool { return m.lists&inContainers != 0 })
	if other {
		r.refuse(r.name, r.ifInit, "the rule applies only to pods with init containers, and does more than rewrite their images: a SandboxPolicy cannot ask whether a pod has init containers")
		return false
	}
	return true
}

// createCheck reports whether cond checks only request.operation, in a
// way CREATE passes.
func createCheck(cond any) bool {
	m, ok := cond.(map[string]any)
	if !ok {
		return false
	}
	key, _ := m["key"].(string)
	if !strings.Contains(strings.ReplaceAll(key, " ", ""), "{{request.operation") {
		return false
	}
	op, _ := m["operator"].(string)
	values, _ := conditionValues(m["value"])
	has := slices.Contains(values, "CREATE")
	switch op {
	case "Equals", "Equal", "In", "AnyIn", "AllIn":
		return has
	case "NotEquals", "NotEqual", "NotIn", "AnyNotIn", "AllNotIn":
		return !has
	}
	return false
}

// conditionValues reads a condition's value, one string or a list of them;
// ok is false when the list holds anything else, which values leaves out.
func conditionValues(v any) (values []string, ok bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		for _, x := range v {
			if s, isString := x.(string); isString {
				values = append(values, s)
			}
		}
		return values, len(values) == len(v)
	}
	return nil, false
}
