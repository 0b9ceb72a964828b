package kyvernoimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// workloadKinds are the kinds whose pods Kyverno's auto-generated rules
// mutate through their templates: the webhook mutates those pods when they
// are created, which comes to the same pods.
var workloadKinds = []string{"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet", "ReplicationController"}

// The paths from a matched object to the pod spec its patch edits: a Pod's
// own, a workload's pod template, a CronJob's.
var (
	podSpecPath     = []string{"spec"}
	templatePath    = []string{"spec", "template", "spec"}
	jobTemplatePath = []string{"spec", "jobTemplate", "spec", "template", "spec"}
)

// block is one resource filter of a match or exclude.
type block struct {
	namespaces                     []string
	namespaceSelector, podSelector *metav1.LabelSelector
	// pods says the block matches Pods; workloads lists the workload
	// kinds it matches, and where.
	pods      bool
	workloads []string
	kindPaths []*field.Path
}

// match converts the rule's match and exclude.
func (r *ruleConverter) match(rule map[string]any) (policy.Match, bool) {
	mp := r.path.Child("match")
	mv, _ := rule["match"].(map[string]any)
	if mv == nil {
		r.refuse(r.name, mp, "the rule has no match")
		return policy.Match{}, false
	}
	anyBlocks, allBlocks, ok := r.filters(mv, mp, true)
	if !ok || !r.kinds(append(slices.Clone(anyBlocks), allBlocks...), mp) {
		return policy.Match{}, false
	}
	var m policy.Match
	// Every block of all holds: their conditions are joined.
	for i, b := range allBlocks {
		if !r.join(&m, b, mp.Child("all").Index(i)) {
			return policy.Match{}, false
		}
	}
	switch len(anyBlocks) {
	case 0:
	case 1:
		if !r.join(&m, anyBlocks[0], mp.Child("any").Index(0)) {
			return policy.Match{}, false
		}
	default:
		for _, b := range anyBlocks {
			mb := policy.MatchBlock{Namespaces: b.namespaces, NamespaceSelector: b.namespaceSelector, PodSelector: b.podSelector}
			if mb.Namespaces == nil && mb.NamespaceSelector == nil && mb.PodSelector == nil {
				mb.Namespaces = []string{"*"}
			}
			m.Any = append(m.Any, mb)
		}
	}
	if r.namespace != "" {
		// A namespaced Policy applies in its own namespace only.
		if m.Namespaces != nil && !slices.Contains(m.Namespaces, r.namespace) {
			r.refuse(r.name, mp, fmt.Sprintf("the Policy lives in namespace %q and matches only others", r.namespace))
			return policy.Match{}, false
		}
		m.Namespaces = []string{r.namespace}
	}
	if m.Namespaces == nil && m.NamespaceSelector == nil && m.PodSelector == nil && m.Any == nil {
		m.Namespaces = []string{"*"} // every pod
	}
	if ev, ok := rule["exclude"].(map[string]any); ok && !r.exclude(&m, ev, r.path.Child("exclude")) {
		return policy.Match{}, false
	}
	return m, true
}

// join adds b's conditions to m, all of which must hold.
func (r *ruleConverter) join(m *policy.Match, b block, path *field.Path) bool {
	if b.namespaces != nil {
		if m.Namespaces != nil {
			r.refuse(r.name, path.Child("resources", "namespaces"), "two blocks that must all hold both list namespaces; a SandboxPolicy has one list")
			return false
		}
		m.Namespaces = b.namespaces
	}
	m.NamespaceSelector = andSelectors(m.NamespaceSelector, b.namespaceSelector)
	m.PodSelector = andSelectors(m.PodSelector, b.podSelector)
	return true
}

func andSelectors(a, b *metav1.LabelSelector) *metav1.LabelSelector {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := a.DeepCopy()
	for k, v := range b.MatchLabels {
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		if old, ok := out.MatchLabels[k]; ok && old != v {
			// Both must hold: no label has two values.
			out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			continue
		}
		out.MatchLabels[k] = v
	}
	out.MatchExpressions = append(out.MatchExpressions, b.MatchExpressions...)
	return out
}

// exclude converts the rule's exclude into m.
func (r *ruleConverter) exclude(m *policy.Match, ev map[string]any, path *field.Path) bool {
	anyBlocks, allBlocks, ok := r.filters(ev, path, false)
	if !ok {
		return false
	}
	blocks, listPath := anyBlocks, path.Child("any")
	if len(allBlocks) > 0 {
		if len(allBlocks) > 1 || len(anyBlocks) > 0 {
			r.refuse(r.name, path.Child("all"), "an exclude whose blocks must all hold cannot be expressed; a SandboxPolicy excludes namespaces or pod labels, each on its own")
			return false
		}
		blocks, listPath = allBlocks, path.Child("all")
	}
	for i, b := range blocks {
		bp := listPath.Index(i).Child("resources")
		switch {
		case b.namespaceSelector != nil:
			r.refuse(r.name, bp.Child("namespaceSelector"), "excluding namespaces by label cannot be expressed; list the namespaces, or select the others with match.namespaceSelector")
			return false
		case b.namespaces != nil && b.podSelector != nil:
			r.refuse(r.name, bp, "excluding pods by namespace and labels together cannot be expressed; a SandboxPolicy excludes namespaces or pod labels, each on its own")
			return false
		case b.namespaces != nil:
			m.ExcludeNamespaces = append(m.ExcludeNamespaces, b.namespaces...)
		case b.podSelector != nil && r.workloads != nil:
			r.refuse(r.name, bp.Child("selector"), workloadSelector)
			return false
		case b.podSelector != nil:
			if m.ExcludePodSelector != nil {
				r.refuse(r.name, bp.Child("selector"), "two excluded pod selectors cannot be expressed; a SandboxPolicy has one")
				return false
			}
			m.ExcludePodSelector = b.podSelector
		default:
			r.refuse(r.name, bp, "this exclude excludes every pod the rule matches")
			return false
		}
	}
	return true
}

// filters reads the any, all and legacy resources blocks of a match or
// exclude. In a match every block must select Pods.
func (r *ruleConverter) filters(v map[string]any, path *field.Path, isMatch bool) (anyBlocks, allBlocks []block, ok bool) {
	for _, k := range sortedKeys(v) {
		switch k {
		case "any", "all":
			list, _ := v[k].([]any)
			for i, f := range list {
				fm, _ := f.(map[string]any)
				b, ok := r.filter(fm, path.Child(k).Index(i), isMatch)
				if !ok {
					return nil, nil, false
				}
				if k == "any" {
					anyBlocks = append(anyBlocks, b)
				} else {
					allBlocks = append(allBlocks, b)
				}
			}
		case "resources", "subjects", "roles", "clusterRoles":
			// The legacy form: one block.
		default:
			r.refuse(r.name, path.Child(k), "not a match field this import knows")
			return nil, nil, false
		}
	}
	if _, ok := v["resources"]; ok {
		legacy := map[string]any{}
		for _, k := range []string{"resources", "subjects", "roles", "clusterRoles"} {
			if x, ok := v[k]; ok {
				legacy[k] = x
			}
		}
		b, ok := r.filter(legacy, path, isMatch)
		if !ok {
			return nil, nil, false
		}
		allBlocks = append(allBlocks, b)
	}
	return anyBlocks, allBlocks, true
}

// filter reads one resource filter.
func (r *ruleConverter) filter(f map[string]any, path *field.Path, isMatch bool) (block, bool) {
	var b block
	for _, k := range sortedKeys(f) {
		if k != "resources" {
			r.refuse(r.name, path.Child(k), "matches the requesting user; the webhook sees every pod's CREATE whoever sends it, and a SandboxPolicy decides on the pod alone")
			return b, false
		}
	}
	res, _ := f["resources"].(map[string]any)
	rp := path.Child("resources")
	for _, k := range sortedKeys(res) {
		kp := rp.Child(k)
		switch k {
		case "kinds":
			kinds, _ := res[k].([]any)
			for i, kv := range kinds {
				kind, _ := kv.(string)
				switch bare := kind[strings.LastIndex(kind, "/")+1:]; {
				case bare == "Pod" && (kind == "Pod" || kind == "v1/Pod" || kind == "*/Pod" || kind == "*/*/Pod" || kind == "/v1/Pod"):
					b.pods = true
				case slices.Contains(workloadKinds, bare):
					b.workloads = append(b.workloads, bare)
					b.kindPaths = append(b.kindPaths, kp.Index(i))
				default:
					r.refuse(r.name, kp.Index(i), fmt.Sprintf("kind %q: sandbox-webhook mutates Pods only", kind))
					return b, false
				}
			}
		case "namespaces":
			list, _ := res[k].([]any)
			for i, nv := range list {
				ns, _ := nv.(string)
				if strings.ContainsAny(ns, `[]\`) || ns == "" {
					r.refuse(r.name, kp.Index(i), fmt.Sprintf("namespace pattern %q: a SandboxPolicy's globs take * and ? only", ns))
					return b, false
				}
				b.namespaces = append(b.namespaces, ns)
			}
		case "namespaceSelector", "selector":
			sel, ok := r.selector(res[k], kp)
			if !ok {
				return b, false
			}
			if k == "selector" {
				b.podSelector = sel
			} else {
				b.namespaceSelector = sel
			}
		case "operations":
			ops, _ := res[k].([]any)
			if isMatch && !slices.Contains(ops, any("CREATE")) {
				r.refuse(r.name, kp, "the rule does not match CREATE, the only operation sandbox-webhook mutates at")
				return b, false
			}
		default: // names, name, annotations, and newer fields
			r.refuse(r.name, kp, "matching pods by "+k+" cannot be expressed; a SandboxPolicy matches namespaces and labels")
			return b, false
		}
	}
	if isMatch && !b.pods && b.workloads == nil {
		r.refuse(r.name, rp.Child("kinds"), "the block does not match Pods")
		return b, false
	}
	return b, true
}

// workloadSelector is why a rule that selects workloads by their labels is
// refused.
const workloadSelector = "selects the workloads by their own labels: the pods they create carry their pod template's labels, which may differ, so no pod selector is sure to select the same pods; " +
	"write the pods' labels in match.podSelector by hand"

// kinds settles what the rule's patch edits: the pod, for a rule that
// matches Pods (the workloads it matches besides are noted: their pods are
// Pods it matches); or the pod template, for a rule that
// matches workloads alone, which must all keep it at the same path and
// not be selected by their labels.
func (r *ruleConverter) kinds(blocks []block, path *field.Path) bool {
	r.podPath = podSpecPath
	pods := slices.ContainsFunc(blocks, func(b block) bool { return b.pods })
	var workloads []string
	for _, b := range blocks {
		if pods {
			for i, kind := range b.workloads {
				r.notes = append(r.notes, fmt.Sprintf("%s: %s: the pods these create are Pods the rule matches, which the webhook mutates; Kyverno generates no rule for their pod template from a rule that names Pod beside them", b.kindPaths[i], kind))
			}
			continue
		}
		workloads = append(workloads, b.workloads...)
	}
	if pods {
		if i := slices.IndexFunc(blocks, func(b block) bool { return !b.pods }); i >= 0 {
			r.refuse(r.name, blocks[i].kindPaths[0], "one block matches Pods, another only workloads: a patch edits a pod's spec or a workload's pod template, not both")
			return false
		}
		return true
	}
	for _, b := range blocks {
		if b.podSelector != nil {
			r.refuse(r.name, path, workloadSelector)
			return false
		}
	}
	cron := slices.Contains(workloads, "CronJob")
	if cron && slices.ContainsFunc(workloads, func(k string) bool { return k != "CronJob" }) {
		r.refuse(r.name, path, "matches CronJobs and other workloads: a CronJob keeps its pod template at spec.jobTemplate.spec.template, the others at spec.template, and one patch edits one of them (Kyverno's auto-generated rules split them)")
		return false
	}
	r.podPath = templatePath
	if cron {
		r.podPath = jobTemplatePath
	}
	slices.Sort(workloads)
	r.workloads = slices.Compact(workloads)
	return true
}

// selector decodes a label selector, refusing wildcards in its values,
// which Kyverno matches as globs and Kubernetes as text.
func (r *ruleConverter) selector(v any, path *field.Path) (*metav1.LabelSelector, bool) {
	sel := &metav1.LabelSelector{}
	js, err := json.Marshal(v)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		err = dec.Decode(sel)
	}
	if err != nil {
		r.refuse(r.name, path, "not a label selector: "+err.Error())
		return nil, false
	}
	for k, val := range sel.MatchLabels {
		if strings.ContainsAny(k+val, "*?") {
			r.refuse(r.name, path.Child("matchLabels").Key(k), "a wildcard in a label selector: Kyverno matches it as a glob, Kubernetes selectors do not")
			return nil, false
		}
	}
	return sel, true
}
