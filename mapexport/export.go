package mapexport

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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

// Exported is one SandboxPolicy as a MutatingAdmissionPolicy and the binding
// that activates it.
type Exported struct {
	Source  string // the SandboxPolicy's name
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
}

// Export compiles every policy of set to a MutatingAdmissionPolicy
// (admissionregistration.k8s.io/v1, GA and on by default since Kubernetes
// 1.36) and its binding, reproducing the webhook's result field for field:
// the same volumes, mounts, env, pod-level memory and status annotation, in
// the same order.
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
// exported objects of a policy with gaps do everything else.
func Export(set *policy.Set, opts Options) ([]Exported, []Gap, error) {
	var (
		out  []Exported
		gaps []Gap
	)
	var enforcing []*policy.Policy
	for _, p := range set.Policies {
		if p.Spec.Enforcement == policy.Shadow {
			gaps = append(gaps, Gap{Policy: p.Name(), What: "enforcement: shadow",
				Why: "a MAP has no report-only mode: it mutates or it does nothing, and it cannot count or log what it would do; not exported"})
			continue
		}
		enforcing = append(enforcing, p)
	}
	if len(enforcing) > 1 {
		names := make([]string, len(enforcing))
		for i, p := range enforcing {
			names[i] = p.Name()
		}
		for _, p := range enforcing[1:] {
			gaps = append(gaps, Gap{Policy: p.Name(), What: "several enforcing policies (" + strings.Join(names, ", ") + ")",
				Why: "the webhook applies policies in name order, gives a contested volume, mount path, env var or pod-level memory to the first, " +
					"and writes one status annotation for all; the apiserver runs MAPs in no defined order and each writes the annotation for itself"})
		}
	}
	for _, p := range enforcing {
		e, pgaps, err := exportPolicy(p, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("policy %q: %w", p.Name(), err)
		}
		gaps = append(gaps, pgaps...)
		out = append(out, e)
	}
	for _, e := range out {
		var own []string
		for _, g := range gaps {
			if g.Policy == e.Source {
				own = append(own, g.What)
			}
		}
		if len(own) > 0 {
			e.Policy.Annotations[GapsAnnotation] = strings.Join(own, "; ")
		}
	}
	return out, gaps, nil
}

func exportPolicy(p *policy.Policy, opts Options) (Exported, []Gap, error) {
	name := NamePrefix + p.Name()
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Exported{}, nil, fmt.Errorf("exported name %q: %s", name, strings.Join(errs, "; "))
	}
	var gaps []Gap
	if m := p.Spec.Memory; m != nil {
		for what, q := range map[string]string{"memory.limit": m.Limit, "memory.request": m.Request} {
			if q == "" {
				continue
			}
			v := p.MemoryLimit
			if what == "memory.request" {
				v = p.MemoryRequest
			}
			if _, ok := v.AsInt64(); !ok {
				gaps = append(gaps, Gap{Policy: p.Name(), What: what + " " + q,
					Why: "not a whole number of bytes: the MAP computes memory in whole bytes"})
			}
		}
	}
	mode := p.Spec.Mode
	switch opts.LeakMitigation {
	case mutate.LeakMitigationOn:
		mode = policy.ModeDisk
	case mutate.LeakMitigationOff:
		mode = policy.ModeMemory
	}

	pr := &program{}
	pd := podVariables(pr)
	b := newBlock(pr, pd, p, mode)
	b.compile()
	b.mutations(b.status(mode))

	fail := admissionregistrationv1.Fail
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	equivalent := admissionregistrationv1.Equivalent
	meta := metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{ManagedByLabel: "sandbox-webhook"},
		Annotations: map[string]string{PolicyAnnotation: p.Name(), HashAnnotation: p.Hash},
	}
	nsSel, conds := matchNamespaces(p, opts)
	podSel, podConds := matchPods(p)
	map_ := &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: meta,
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
				MatchPolicy: &equivalent,
			},
			MatchConditions:    append(conds, podConds...),
			Variables:          pr.vars,
			Mutations:          pr.mutations,
			FailurePolicy:      &fail,
			ReinvocationPolicy: ifNeeded,
		},
	}
	bmeta := meta
	bmeta.Labels = map[string]string{ManagedByLabel: "sandbox-webhook"}
	bmeta.Annotations = map[string]string{PolicyAnnotation: p.Name(), HashAnnotation: p.Hash}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: bmeta,
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	return Exported{Source: p.Name(), Policy: map_, Binding: binding}, gaps, nil
}

// matchNamespaces returns the namespace selector and the match conditions
// that select the policy's namespaces: kube-system and the excluded
// namespaces never; plain names through the metadata.name label; globs
// through CEL on the request's namespace; the namespace selector as is.
func matchNamespaces(p *policy.Policy, opts Options) (*metav1.LabelSelector, []admissionregistrationv1.MatchCondition) {
	m := &p.Spec.Match
	sel := &metav1.LabelSelector{}
	if m.NamespaceSelector != nil {
		sel = m.NamespaceSelector.DeepCopy()
	}
	const nameLabel = "kubernetes.io/metadata.name"
	excluded := append([]string{"kube-system"}, opts.ExcludeNamespaces...)
	var conds []admissionregistrationv1.MatchCondition
	var excludeGlobs []string
	for _, g := range m.ExcludeNamespaces {
		if n, ok := isPlainName(g); ok {
			excluded = append(excluded, n)
		} else {
			excludeGlobs = append(excludeGlobs, g)
		}
	}
	slices.Sort(excluded)
	excluded = slices.Compact(excluded)
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: nameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
	})
	if len(excludeGlobs) > 0 {
		conds = append(conds, admissionregistrationv1.MatchCondition{
			Name:       "exclude-namespaces",
			Expression: not(globsMatch("request.namespace", excludeGlobs)),
		})
	}
	if len(m.Namespaces) > 0 {
		var names []string
		plain := true
		for _, g := range m.Namespaces {
			n, ok := isPlainName(g)
			plain = plain && ok
			names = append(names, n)
		}
		if plain {
			slices.Sort(names)
			sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: nameLabel, Operator: metav1.LabelSelectorOpIn, Values: slices.Compact(names),
			})
		} else {
			conds = append(conds, admissionregistrationv1.MatchCondition{
				Name:       "namespaces",
				Expression: globsMatch("request.namespace", m.Namespaces),
			})
		}
	}
	return sel, conds
}

// matchPods returns the object selector and the match conditions that
// select the policy's pods: the pod selector, the opt-out label as a NotIn
// requirement, and in CEL the excluded pods, the opt-out annotation and
// Windows pods (never mutated: the caches, env and pod-level resources are
// Linux-only).
func matchPods(p *policy.Policy) (*metav1.LabelSelector, []admissionregistrationv1.MatchCondition) {
	m := &p.Spec.Match
	sel := &metav1.LabelSelector{}
	if m.PodSelector != nil {
		sel = m.PodSelector.DeepCopy()
	}
	conds := []admissionregistrationv1.MatchCondition{{
		Name:       "not-windows",
		Expression: "object.spec.?os.?name.orValue('') != 'windows'",
	}}
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
