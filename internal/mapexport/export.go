package mapexport

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

const (
	// NamePrefix starts the name of every exported policy and binding.
	NamePrefix = "sandbox-webhook-"
	// PolicyAnnotation names the SandboxPolicy an object was exported from.
	PolicyAnnotation = "sandbox-webhook.io/policy"
	// HashAnnotation is the exported SandboxPolicy's content hash, the one
	// the status annotation records.
	HashAnnotation = "sandbox-webhook.io/policy-hash"
	// GapsAnnotation lists, on a partial export, what it does not do.
	GapsAnnotation = "sandbox-webhook.io/export-gaps"
	// ManagedByLabel marks every exported object.
	ManagedByLabel = "app.kubernetes.io/managed-by"
)

// CELCompatibility is the version whose CEL environment exported expressions
// are written for. The oldest apiserver the exported policies are for is
// 1.36, where admissionregistration v1 MutatingAdmissionPolicy is GA; it
// compiles new expressions against the CEL environment of its compatibility
// version, 1.35, and so do the offline runner (mapexport/maprun) and the
// tests: an expression that compiles there is accepted by the apiserver.
var CELCompatibility = version.MajorMinor(1, 35)

// Options are the settings the webhook would run the policies with.
type Options struct {
	// LeakMitigation forces the mode of every policy, as the webhook's
	// --leak-mitigation does. The mode is compiled into the policy.
	LeakMitigation mutate.LeakMitigation
	// ExcludeNamespaces are never mutated (the webhook's
	// --exclude-namespace). kube-system always is excluded.
	ExcludeNamespaces []string
}

// Gap is something the webhook does for a policy that the exported
// MutatingAdmissionPolicy cannot do, so the apiserver would store a
// different pod.
type Gap struct {
	// Policy is the SandboxPolicy concerned.
	Policy string
	// What names the feature.
	What string
	// Why says why a MAP cannot do it.
	Why string
}

func (g Gap) String() string {
	return fmt.Sprintf("policy %q: %s: %s", g.Policy, g.What, g.Why)
}

// Exported is a MutatingAdmissionPolicy and the binding that activates it,
// compiled from one SandboxPolicy, or from all the enforcing policies of a
// set that has several.
type Exported struct {
	// Sources are the SandboxPolicies compiled into Policy, in order.
	Sources []string
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// Differences are what the webhook does beyond the stored pod, which no
// exported policy does either; they are not gaps (the stored pod is the
// same) and are documented in docs/map-export.md.
var Differences = []string{
	"no warnings: the apiserver shows clients no warning from a MAP (the webhook's kept env vars, hostPaths in a Pod Security namespace, contested items)",
	"no metrics or logs of decisions: a MAP is observed through the apiserver's own admission metrics",
	"the status annotation of an earlier pass (reinvocation, a re-created pod) is read by its exact text, as sandbox-webhook writes it; the webhook parses any JSON",
	"memory quantities are computed in whole bytes: a pod with a fractional-byte or exabyte-sized memory quantity is rejected (failurePolicy: Fail) instead of mutated",
	"a memory quantity of the pod or its status annotation is judged by its spelling, not its value: one with more than 19 digits, more than 18 decimals or an exponent beyond 18 is refused (a JSONPatch to a path that says so, which cannot apply), before the apiserver's quantity() compares it",
}

// Export compiles the policies of set to MutatingAdmissionPolicies
// (admissionregistration.k8s.io/v1, GA and on by default since Kubernetes
// 1.36) and their bindings, reproducing the webhook's result field for
// field: the same volumes, mounts, env, pod-level memory and status
// annotation, in the same order.
//
// A set with one enforcing policy gives one MAP named after it. A set with
// several gives one MAP for all of them: the webhook applies policies in
// name order, gives a volume name, mount path, env var or the pod-level
// memory that two of them declare to the first that selects the pod, and
// writes one status annotation for all, while the apiserver runs separate
// MAPs in no defined order. The MAP's mutations are then one per policy, in
// name order, each guarded by the policy's own selectors in CEL, and a last
// one that moves the pod's own memory-backed emptyDirs to disk for the
// disk-mode policies, after every policy has injected as in the webhook, and
// writes the annotation.
//
// The exported policies match CREATE of pods only, never in kube-system,
// with the policy's selectors as the policy's matchConstraints (label
// selectors) and matchConditions (globs, exclusions, opt-out, Windows).
// They use failurePolicy: Fail, for the webhook's reason: the selectors
// limit the blast radius to sandbox pods, and Ignore would silently admit
// unmutated pods (for a pre-staged asset: silent zero rewards). With a MAP,
// a failure is a CEL runtime error, not an unreachable server.
// reinvocationPolicy is IfNeeded: every mutation is guarded ("only if
// absent") so a second run changes nothing, and a container a later webhook
// adds gets its mounts and env.
//
// The mode, sizes, paths and names are CEL literals, not a params object: a
// paramKind would need a CRD or a ConfigMap to hold them, plus a paramRef
// in the binding, only to carry values that are fixed per export; flipping
// leak-mitigation is an export with another --leak-mitigation and an apply.
//
// What a MAP cannot reproduce is returned as gaps, policy by policy; the
// exported objects do everything else.
//
// A policy with an item no MAP expresses yet is refused by name (refused).
func Export(set *policy.Set, opts Options) ([]Exported, []Gap, error) {
	var (
		gaps      []Gap
		enforcing []*policy.Policy
	)
	for _, p := range set.Policies {
		if len(p.Spec.Match.Any) > 0 {
			return nil, nil, fmt.Errorf("policy %q: match.any cannot be exported to a MutatingAdmissionPolicy yet: write one policy per block to export it", p.Name())
		}
		if p.Spec.Enforcement == policy.Shadow {
			gaps = append(gaps, Gap{Policy: p.Name(), What: "enforcement: shadow",
				Why: "a MAP has no report-only mode: it mutates or it does nothing, and it cannot count or log what it would do; not exported"})
			continue
		}
		if err := refused(p, opts); err != nil {
			return nil, nil, err
		}
		enforcing = append(enforcing, p)
	}
	var e Exported
	switch len(enforcing) {
	case 0:
		return nil, gaps, nil
	case 1:
		var err error
		if e, err = exportPolicy(enforcing[0], opts); err != nil {
			return nil, nil, err
		}
	default:
		e = exportPolicies(enforcing, opts)
	}
	// Every gap is a shadow policy, left out of the exported one.
	if len(gaps) > 0 {
		e.Policy.Annotations[GapsAnnotation] = strings.Join(each(gaps, func(g Gap) string { return g.Policy + ": " + g.What }), "; ")
	}
	return []Exported{e}, gaps, nil
}

// exportPolicy compiles a policy that is the only enforcing one of its set.
func exportPolicy(p *policy.Policy, opts Options) (Exported, error) {
	name := NamePrefix + p.Name()
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Exported{}, fmt.Errorf("policy %q: exported name %q: %s", p.Name(), name, strings.Join(errs, "; "))
	}
	mode := opts.LeakMitigation.Mode(p)
	pr := &program{}
	pd := podVariables(pr)
	b := newBlock(pr, pd, p, mode, "", nil)
	b.compile()
	if mode == policy.ModeDisk {
		b.convert()
	}
	b.mutations(setAnnotation(mutate.StatusAnnotation, b.status()))
	return newExported(name, []*policy.Policy{p}, pr, p, opts), nil
}

// passAnnotation holds, during one admission, what the policies compiled
// into one MAP have done so far, for the status annotation the MAP's last
// mutation writes; the last mutation removes it. It has a line per policy
// that selects the pod, 'P', the policy's index, a tab, the head of its
// status entry, a tab and its skipped items joined by commas, and a line
// 'M' and the podMemory member for the one that sets the pod-level memory.
// JSON text has no raw tab or newline.
const passAnnotation = "sandbox-webhook.io/export-map-pass"

// exportPolicies compiles the enforcing policies of a set into one MAP.
func exportPolicies(ps []*policy.Policy, opts Options) Exported {
	pr := &program{}
	pd := podVariables(pr)
	cl := claims{}
	var (
		blocks []*block
		any    []string
	)
	pass := fmt.Sprintf("object.metadata.?annotations[?%s].orValue('')", str(passAnnotation))
	for k, p := range ps {
		// Match conditions get no namespace object: they select without
		// the namespace's labels, the mutations then with them.
		any = append(any, matchCEL(p, false))
		b := newBlock(pr, pd, p, opts.LeakMitigation.Mode(p), fmt.Sprintf("p%d_", k), cl)
		b.matched = b.def("match", matchCEL(p, true))
		b.compile()
		head, skipped := b.statusHead()
		head = b.def("statusHead", head)
		memory := b.statusMemory()
		lines := fmt.Sprintf("[%s + %s + '\\t' + %s.join(',')] + (%s != '' ? ['M' + %s] : [])",
			str(fmt.Sprintf("P%d\t", k)), head, skipped, memory, memory)
		b.mutations(setAnnotation(passAnnotation, fmt.Sprintf("[%s].map(s, (s == '' ? '' : s + '\\n') + (%s).join('\\n'))[0]", pass, lines)))
		blocks = append(blocks, b)
	}
	// The disk-mode policies convert the pod's own memory-backed emptyDirs
	// in the last mutation, after every policy has injected, as the webhook
	// does: no policy's cache is taken for the pod's own, whatever the
	// order.
	converts, kept := conversion(pr, pd, blocks, cl)
	lines := pr.def("passLines", pass+".split('\\n')")
	// An entry is its head, its skipped items and then those of the
	// conversion, which the webhook records after every policy's apply.
	skipped := "(p[2] == '' ? [] : [p[2]])"
	if converts != "" {
		skipped += fmt.Sprintf(" + [%s][int(p[0])]", strings.Join(kept, ", "))
	}
	entries := fmt.Sprintf("%s.filter(l, l.startsWith('P')).map(l, l.substring(1).split('\\t')).map(p, p[1] + [%s].map(s, size(s) > 0 ? ',\"skipped\":[' + s.join(',') + ']' : '')[0] + '}')",
		lines, skipped)
	converted := convertedNames(pr, pd, converts)
	memory := fmt.Sprintf("[%s.filter(l, l.startsWith('M'))].map(m, size(m) > 0 ? m[0].substring(1) : '')[0]", lines)
	status := statusText(pr, pd, paren(entries), converted, paren(memory), nil)
	ops := fmt.Sprintf("[JSONPatch{op: 'add', path: %s, value: %s}, JSONPatch{op: 'remove', path: %s}]",
		str("/metadata/annotations/"+pointerEscape(mutate.StatusAnnotation)), status, str("/metadata/annotations/"+pointerEscape(passAnnotation)))
	if converts != "" {
		ops = fmt.Sprintf("%s.map(i, JSONPatch{op: 'remove', path: '/spec/volumes/' + string(i) + '/emptyDir/medium'}) + %s", converts, ops)
	}
	// Nothing to record when no policy selected the pod after all (the
	// match conditions do not see the namespace's labels).
	pr.jsonPatch(fmt.Sprintf("%s == '' ? [] : %s", pass, ops))

	// The MAP matches as an empty policy would (every pod but those that
	// Options and Windows exclude) and then as any of the policies might.
	return newExported(strings.TrimSuffix(NamePrefix, "-"), ps, pr, &policy.Policy{}, opts,
		admissionregistrationv1.MatchCondition{Name: "any-policy", Expression: layout(or(any...))})
}

// newExported returns the MAP of the program pr compiled from ps and its
// binding, matching pod CREATEs as match does (matchNamespaces, matchPods)
// and then the extra conditions.
func newExported(name string, ps []*policy.Policy, pr *program, match *policy.Policy, opts Options, extra ...admissionregistrationv1.MatchCondition) Exported {
	nsSel, conds := matchNamespaces(match, opts)
	podSel, podConds := matchPods(match)
	names := each(ps, (*policy.Policy).Name)
	hashes := each(ps, func(p *policy.Policy) string { return p.Hash })
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{ManagedByLabel: "sandbox-webhook"},
			Annotations: map[string]string{PolicyAnnotation: strings.Join(names, ","), HashAnnotation: strings.Join(hashes, ",")},
		}
	}
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: meta(),
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: nsSel,
				ObjectSelector:    podSel,
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{""},
							APIVersions: []string{"v1"},
							Resources:   []string{"pods"},
						},
					},
				}},
				MatchPolicy: new(admissionregistrationv1.Equivalent),
			},
			MatchConditions:    append(append(conds, podConds...), extra...),
			Variables:          pr.vars,
			Mutations:          pr.mutations,
			FailurePolicy:      new(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: meta(),
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	return Exported{Sources: names, Policy: p, Binding: binding}
}

// matchNamespaces returns the namespace selector and the match conditions
// that select the policy's namespaces: kube-system and the excluded
// namespaces never; plain names through the metadata.name label; globs
// through CEL on the request's namespace; the namespace selector as is.
func matchNamespaces(p *policy.Policy, opts Options) (*metav1.LabelSelector, []admissionregistrationv1.MatchCondition) {
	m := &p.Spec.Match
	sel := cmp.Or(m.NamespaceSelector, &metav1.LabelSelector{}).DeepCopy()
	const nameLabel = "kubernetes.io/metadata.name"
	excluded := append([]string{"kube-system"}, opts.ExcludeNamespaces...)
	var excludeGlobs []string
	for _, g := range m.ExcludeNamespaces {
		if isGlob(g) {
			excludeGlobs = append(excludeGlobs, g)
		} else {
			excluded = append(excluded, plainName(g))
		}
	}
	slices.Sort(excluded)
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: nameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: slices.Compact(excluded),
	})
	var conds []admissionregistrationv1.MatchCondition
	if len(excludeGlobs) > 0 {
		conds = append(conds, admissionregistrationv1.MatchCondition{
			Name:       "exclude-namespaces",
			Expression: not(globsMatch("request.namespace", excludeGlobs)),
		})
	}
	switch {
	case slices.ContainsFunc(m.Namespaces, isGlob):
		conds = append(conds, admissionregistrationv1.MatchCondition{
			Name:       "namespaces",
			Expression: globsMatch("request.namespace", m.Namespaces),
		})
	case len(m.Namespaces) > 0:
		names := each(m.Namespaces, plainName)
		slices.Sort(names)
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: nameLabel, Operator: metav1.LabelSelectorOpIn, Values: slices.Compact(names),
		})
	}
	return sel, conds
}

// matchPods returns the object selector and the match conditions that
// select the policy's pods: the pod selector, the opt-out label as a NotIn
// requirement, and in CEL the excluded pods, the opt-out annotation and
// Windows pods (notWindows).
func matchPods(p *policy.Policy) (*metav1.LabelSelector, []admissionregistrationv1.MatchCondition) {
	m := &p.Spec.Match
	sel := cmp.Or(m.PodSelector, &metav1.LabelSelector{}).DeepCopy()
	conds := []admissionregistrationv1.MatchCondition{{Name: "not-windows", Expression: notWindows}}
	if o := m.OptOut; o != nil && o.Label != "" {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: o.Label, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"},
		})
	}
	if m.ExcludePodSelector != nil {
		conds = append(conds, admissionregistrationv1.MatchCondition{
			Name:       "exclude-pods",
			Expression: not(selectorCEL("object.metadata.?labels.orValue({})", m.ExcludePodSelector)),
		})
	}
	if o := m.OptOut; o != nil && o.Annotation != "" {
		conds = append(conds, admissionregistrationv1.MatchCondition{
			Name:       "opt-out-annotation",
			Expression: fmt.Sprintf("object.metadata.?annotations[?%s].orValue('') != 'true'", str(o.Annotation)),
		})
	}
	return sel, conds
}

// notWindows selects pods that are not Windows pods, which the webhook never
// mutates: the caches, env and pod-level resources are Linux-only.
const notWindows = "object.spec.?os.?name.orValue('') != 'windows'"

// matchCEL returns a CEL condition equivalent to the policy's whole match
// (mutate's match): namespaces, excluded namespaces, the namespace's labels,
// the pod's labels, the excluded pods and the opt-out label and annotation.
// kube-system, the excluded namespaces of Options and Windows pods are left
// to the MAP's own constraints. Without namespaceLabels, the namespace
// selector is left out (the condition is then necessary, not sufficient).
func matchCEL(p *policy.Policy, namespaceLabels bool) string {
	m := &p.Spec.Match
	labels := "object.metadata.?labels.orValue({})"
	var conds []string
	if len(m.ExcludeNamespaces) > 0 {
		conds = append(conds, not(globsMatch("request.namespace", m.ExcludeNamespaces)))
	}
	if len(m.Namespaces) > 0 {
		conds = append(conds, globsMatch("request.namespace", m.Namespaces))
	}
	if m.NamespaceSelector != nil && namespaceLabels {
		conds = append(conds, selectorCEL("namespaceObject.metadata.?labels.orValue({})", m.NamespaceSelector))
	}
	if m.PodSelector != nil {
		conds = append(conds, selectorCEL(labels, m.PodSelector))
	}
	if m.ExcludePodSelector != nil {
		conds = append(conds, not(selectorCEL(labels, m.ExcludePodSelector)))
	}
	if o := m.OptOut; o != nil {
		if o.Label != "" {
			conds = append(conds, fmt.Sprintf("%s[?%s].orValue('') != 'true'", labels, str(o.Label)))
		}
		if o.Annotation != "" {
			conds = append(conds, fmt.Sprintf("object.metadata.?annotations[?%s].orValue('') != 'true'", str(o.Annotation)))
		}
	}
	return and(conds...)
}

// refused names the first item of p that no MAP expresses yet, or nil.
func refused(p *policy.Policy, opts Options) error {
	env := slices.IndexFunc(p.Spec.Env, func(e policy.EnvVar) bool { return e.Position != "" })
	asset := slices.IndexFunc(p.Spec.Assets, func(a policy.Asset) bool { return len(a.ImageForRuntimeClasses) > 0 })
	var why string
	switch {
	case p.Spec.ContainerLimits == policy.RaiseLimits && opts.LeakMitigation.Mode(p) == policy.ModeMemory:
		why = "containerLimits: raise cannot be exported to a MutatingAdmissionPolicy yet: a MAP would have to add the caches' sizes to each container's limit and record what it was; export it with containerLimits: keep"
	case p.Spec.Shm != nil:
		why = "shm cannot be exported to a MutatingAdmissionPolicy yet: export it without shm, and keep the webhook for /dev/shm"
	case p.Spec.Disk != nil:
		why = "disk cannot be exported to a MutatingAdmissionPolicy yet: a MAP would have to find a pod's first selected app container and every container's own ephemeral-storage; export it without disk"
	case p.Spec.Runtime != nil:
		why = "runtime cannot be exported to a MutatingAdmissionPolicy yet: a MAP would have to merge tolerations and nodeSelector entries with the pod's own and warn on a conflict; export it without runtime"
	case len(p.Spec.ImageMirrors) > 0:
		why = "imageMirrors cannot be exported to a MutatingAdmissionPolicy yet: a MAP would have to normalise image names as the container runtime does; export it without imageMirrors"
	case env >= 0:
		why = fmt.Sprintf("env[%d].position cannot be exported to a MutatingAdmissionPolicy yet: a MAP would have to split the container's own list to add the entry once; export it without env entries that have a position", env)
	case asset >= 0:
		why = fmt.Sprintf("assets[%d].imageForRuntimeClasses cannot be exported to a MutatingAdmissionPolicy yet: export it without imageForRuntimeClasses", asset)
	default:
		return nil
	}
	return fmt.Errorf("policy %q: %s", p.Name(), why)
}
