// Package kyvernoimport converts Kyverno mutate policies of the shapes
// sandbox-webhook replaces into SandboxPolicy documents: emptyDir caches and
// read-only hostPath mounts in the containers a rule reaches (every one, or
// those it selects by list and name), literal env and entries added to a
// container's own list variable (PATH), memory limits, runtime placement,
// image rewrites by a registry prefix, and matches by kind, namespace and labels, of pods or of the workloads whose
// pod templates a rule patches. Every part it does not convert is reported
// with its field path and why; nothing is dropped silently or guessed.
//
// It reads the policies as generic YAML: the product does not link Kyverno,
// and a field of a newer Kyverno that this package does not know is reported
// like any other part it does not convert.
package kyvernoimport

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Finding is one part of a Kyverno policy the import left out, or a
// document it refused.
type Finding struct {
	Source string // the file, with #N for the Nth document
	Policy string // "ClusterPolicy name"; "" when the document is not a policy
	Rule   string // the rule's name; "" for the policy as a whole
	Path   string // the field path in the document
	Reason string
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Source)
	if f.Policy != "" {
		b.WriteString(": " + f.Policy)
	}
	if f.Rule != "" {
		b.WriteString(" rule " + f.Rule)
	}
	if f.Path != "" {
		b.WriteString(": " + f.Path)
	}
	b.WriteString(": " + f.Reason)
	return b.String()
}

// Destination says where a part the import left out can live once Kyverno
// stops running ClusterPolicies and Policies (deprecated in Kyverno 1.17,
// planned for removal in 1.20), judged by its field path: a RuntimeClass's
// scheduling for what places pods on a runtime's nodes, a registry mirror
// on the nodes for image rewrites, a LimitRange for CPU defaults, and
// otherwise a MutatingAdmissionPolicy (Kubernetes 1.36 and later) or
// Kyverno's own CEL MutatingPolicy.
func (f Finding) Destination() string {
	const mutating = "a MutatingAdmissionPolicy (Kubernetes 1.36+) or Kyverno's CEL MutatingPolicy"
	p := f.Path
	switch {
	case strings.Contains(p, ".validate") || strings.Contains(p, ".verifyImages"):
		return "a ValidatingAdmissionPolicy or Kyverno's CEL ValidatingPolicy"
	case strings.Contains(p, ".generate"):
		return "Kyverno's CEL GeneratingPolicy"
	case strings.Contains(p, ".tolerations") || strings.Contains(p, ".nodeSelector") ||
		strings.Contains(p, ".affinity") || strings.Contains(p, ".runtimeClassName"):
		return "the RuntimeClass's scheduling (nodeSelector and tolerations that follow the sandbox runtime), or " + mutating
	case strings.Contains(p, ".image"):
		return "a registry mirror on the nodes (containerd's hosts.toml), or " + mutating
	case strings.Contains(p, ".cpu"):
		return "a LimitRange's default for CPU, or " + mutating
	}
	return mutating
}

// Origin names the Kyverno policy and rules a SandboxPolicy came from.
type Origin struct {
	Source, Policy string
	Rules          []string
}

// Converted is one SandboxPolicy and where it came from.
type Converted struct {
	Policy policy.SandboxPolicy
	From   []Origin
	// Notes say what the reader should know: a merged disk variant, a
	// behaviour that differs in a way no pod of the match is expected to
	// see.
	Notes []string
}

// Result is what an import made of its input.
type Result struct {
	Policies []Converted
	// LeftOut lists every part of a mutate rule not converted; Refused the
	// documents and rules not converted at all (validate rules, other
	// kinds, CEL policies).
	LeftOut, Refused []Finding
	// Differences lists the parts converted with a difference the reader
	// should know (each says what Kyverno did and what sandbox-webhook
	// does): converted, not left out.
	Differences []Finding
	// Rules counts the mutate rules read, Converted those converted whole,
	// and ConvertedWithDifference those of them with a difference.
	Rules, Converted, ConvertedWithDifference int
}

// Exact reports whether every mutate rule converted exactly and nothing was
// refused.
func (r Result) Exact() bool { return len(r.LeftOut) == 0 && len(r.Refused) == 0 }

// Document is one YAML or JSON document of the input.
type Document struct {
	Source string
	JSON   []byte
}

// maxDocument bounds one document of the input.
const maxDocument = 4 << 20

// Split reads the documents of one YAML (or JSON) stream; source names it.
func Split(source string, raw []byte) ([]Document, error) {
	var docs []Document
	for i, d := range yamldoc.Split(raw) {
		n := i + 1
		if len(d.Text) > maxDocument {
			return nil, fmt.Errorf("%s#%d: a document of %d bytes; the limit is %d", source, n, len(d.Text), maxDocument)
		}
		if onlyComments(d.Text) {
			continue
		}
		js, err := sigsyaml.YAMLToJSON(d.Text)
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", source, n, err)
		}
		docs = append(docs, Document{Source: fmt.Sprintf("%s#%d", source, n), JSON: js})
	}
	if len(docs) == 1 {
		docs[0].Source = source
	}
	return docs, nil
}

// onlyComments reports whether a document holds nothing but comment lines
// and blank ones.
func onlyComments(raw []byte) bool {
	for line := range bytes.Lines(raw) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// Convert converts the Kyverno policies of docs.
func Convert(docs []Document) Result {
	var res Result
	var all []*converted
	for _, d := range docs {
		all = append(all, convertDocument(d, &res)...)
	}
	for _, c := range merge(all) {
		if _, err := policy.Parse(c.Policy.Metadata.Name, mustYAML(c.Policy)); err != nil {
			o := c.From[0]
			res.Refused = append(res.Refused, Finding{Source: o.Source, Policy: o.Policy,
				Reason: "the SandboxPolicy it converts to is invalid: " + err.Error()})
			continue
		}
		res.Policies = append(res.Policies, c)
	}
	return res
}

// YAML writes c as a SandboxPolicy document, preceded by comments naming
// the Kyverno policies and rules it came from and its notes.
func (c Converted) YAML() []byte {
	var b bytes.Buffer
	for _, o := range c.From {
		// Names come from the input: escaped, none can end the comment.
		fmt.Fprintf(&b, "# Imported from Kyverno %s (%s), rules: %s\n", textout.EscapeControl(o.Policy), textout.EscapeControl(o.Source),
			textout.EscapeControl(strings.Join(o.Rules, ", ")))
	}
	for i, n := range c.Notes {
		if !slices.Contains(c.Notes[:i], n) {
			fmt.Fprintf(&b, "# Note: %s\n", textout.EscapeControl(n))
		}
	}
	b.Write(mustYAML(c.Policy))
	return b.Bytes()
}

// mustYAML encodes a SandboxPolicy, which always encodes.
func mustYAML(sp policy.SandboxPolicy) []byte {
	out, err := sigsyaml.Marshal(sp)
	if err != nil {
		panic(err)
	}
	return out
}

// converted is a SandboxPolicy in the making, before policies that differ
// only in their mode are merged.
type converted struct {
	Converted
	kyvernoName string
}

func convertDocument(d Document, res *Result) []*converted {
	var v any
	err := sigsyaml.Unmarshal(d.JSON, &v)
	doc, ok := v.(map[string]any)
	if err != nil || !ok {
		res.Refused = append(res.Refused, Finding{Source: d.Source, Reason: "not a YAML mapping"})
		return nil
	}
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	name, _, _ := unstructured.NestedString(doc, "metadata", "name")
	group, _, _ := strings.Cut(apiVersion, "/")
	if apiVersion == "v1" && kind == "List" { // kubectl get -o yaml
		items, _ := doc["items"].([]any)
		var out []*converted
		for i, item := range items {
			js, err := json.Marshal(item)
			if err != nil {
				continue // a decoded document always encodes
			}
			out = append(out, convertDocument(Document{Source: fmt.Sprintf("%s items[%d]", d.Source, i), JSON: js}, res)...)
		}
		return out
	}
	switch {
	case group == "policies.kyverno.io":
		res.Refused = append(res.Refused, Finding{Source: d.Source, Policy: kind + " " + name,
			Reason: "a CEL policy of " + apiVersion + "; import converts the kyverno.io ClusterPolicy and Policy (v1, v2beta1), which express the same mutations as patches: rewrite it as one, or as a SandboxPolicy"})
		return nil
	case (apiVersion != "kyverno.io/v1" && apiVersion != "kyverno.io/v2beta1") || (kind != "ClusterPolicy" && kind != "Policy"):
		res.Refused = append(res.Refused, Finding{Source: d.Source, Policy: strings.TrimSpace(kind + " " + name),
			Reason: fmt.Sprintf("not a Kyverno ClusterPolicy or Policy (apiVersion %q, kind %q)", apiVersion, kind)})
		return nil
	}
	c := &policyConverter{source: d.Source, label: kind + " " + name, res: res}
	if kind == "Policy" {
		ns, _, _ := unstructured.NestedString(doc, "metadata", "namespace")
		c.namespace = cmp.Or(ns, "default")
	}
	return c.convert(name, doc)
}

// sortedKeys returns m's keys in order, so that findings come in the same
// order every run.
func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// merge joins policies that do the same into one, and those that differ
// only in their mode (the notes' memory policy and its disk variant) into
// one of the memory mode.
func merge(all []*converted) []Converted {
	var out []Converted
	byKey := map[string]int{}
	names := map[string]int{}
	for _, c := range all {
		spec := c.Policy.Spec
		spec.Mode = ""
		key, _ := json.Marshal(spec)
		if i, ok := byKey[string(key)]; ok && out[i].Policy.Spec.Mode == c.Policy.Spec.Mode {
			// The same policy twice (two copies of one, or two Kyverno
			// policies doing the same): one SandboxPolicy does it.
			out[i].From = append(out[i].From, c.From...)
			out[i].Notes = append(out[i].Notes, c.Notes...)
			continue
		} else if ok {
			o := &out[i]
			memory, disk := o, c.Converted
			if o.Policy.Spec.Mode == policy.ModeDisk {
				o.Policy.Spec.Mode = policy.ModeMemory
				disk = Converted{From: o.From}
				o.From = c.From
			}
			memory.From = append(memory.From, disk.From...)
			memory.Notes = append(memory.Notes, c.Notes...)
			memory.Notes = append(memory.Notes, fmt.Sprintf("%s is this policy with its caches on disk: run the server with --leak-mitigation on to get it (the chart's leakMitigation), off or policy for this one", disk.From[0].Policy))
			continue
		}
		byKey[string(key)] = len(out)
		names[c.Policy.Metadata.Name]++
		if n := names[c.Policy.Metadata.Name]; n > 1 {
			c.Policy.Metadata.Name = fmt.Sprintf("%s-%d", c.Policy.Metadata.Name, n)
		}
		out = append(out, c.Converted)
	}
	for i := range out {
		if out[i].Policy.Spec.Mode == policy.ModeDisk || slices.ContainsFunc(out[i].Notes, func(n string) bool { return strings.Contains(n, "--leak-mitigation on") }) {
			out[i].Notes = append(out[i].Notes, "in disk mode sandbox-webhook also moves the pod's own memory-backed emptyDirs to disk (list those to keep, /dev/shm for one, in spec.keepMemoryVolumes); the Kyverno policy left them")
		}
	}
	return out
}

// listEntryWhy says why Kyverno rules that add to a container's own list
// variable, but not as listEntry reads them, do not become env entries
// with a position.
const listEntryWhy = "Kyverno cannot add an entry to a container's own variable: a rule that reads it " +
	"(element.env[?name=='PATH'].value) writes the whole value, gives a container without the variable \"ENTRY:null\", " +
	"one that sets it from valueFrom both value and valueFrom (a pod the API server refuses), and one that has the entry first a second copy; " +
	"import converts \"ENTRY:{{ element.env[?name=='PATH'].value | [0] }}\" (or \"{{ ... }}:ENTRY\", the same variable's own value and nothing else, in a foreach's strategic merge) into env with position, which differs from Kyverno on those containers only; " +
	"write env with position: prepend (and ifUnset) by hand"

// NotImported are the SandboxPolicy fields (their path under spec) that no
// Kyverno rule converts into, and why: a policy that needs one gets it
// written by hand after the import.
var NotImported = map[string]string{
	"enforcement":                     "a Kyverno mutate rule mutates or does nothing: it has no report-only mode to become shadow",
	"match.any[].excludeNamespaces":   "a Kyverno exclude applies to the whole rule: it becomes match.excludeNamespaces",
	"match.any[].excludePodSelector":  "a Kyverno exclude applies to the whole rule: it becomes match.excludePodSelector",
	"match.optOut.label":              "Kyverno has no opt-out of a rule; an exclude on a pod label becomes match.excludePodSelector",
	"match.optOut.annotation":         "Kyverno has no opt-out of a rule by annotation",
	"keepMemoryVolumes[].name":        "a Kyverno rule does not move a pod's own emptyDirs off tmpfs; disk mode (mode: disk) does, and keeps what this names",
	"keepMemoryVolumes[].mountPath":   "a Kyverno rule does not move a pod's own emptyDirs off tmpfs; disk mode (mode: disk) does, and keeps what this names",
	"containerLimits":                 "adding the caches' sizes to a container's own limit takes arithmetic over it in a Kyverno rule, which this import does not convert",
	"assets[].image.reference":        "an image volume in a Kyverno rule is left with its path (a volume of another type than emptyDir or hostPath)",
	"assets[].image.pullPolicy":       "an image volume in a Kyverno rule is left with its path (a volume of another type than emptyDir or hostPath)",
	"assets[].imageForRuntimeClasses": "a Kyverno rule gives an asset one source; choosing it by the pod's runtime class is written by hand",
	"env[].ifUnset":                   "Kyverno sees the pod, not the image: a rule that adds to a container's own variable has no value for a container that leaves it to the image (it writes \"ENTRY:null\"), so none names the image's list that ifUnset gives such a container",
}
