// Package preview runs one input object through the webhook's mutation
// offline, as the webhook would (mutate.Pod, then mutate.Patch, the same
// JSONPatch, applied to the object with evanphx/json-patch, as the
// apiserver applies it), and writes the report of what was decided:
// dry-run, test and check share it. A pod that is, as a JSON value, the
// encoding of what it decodes to (a stored pod as kubectl prints it) is
// not patched: what the patch gives it is then the encoding of the mutated
// pod (mutate.PatchResult), with its members in another order.
package preview

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/pmezard/go-difflib/difflib"
	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Pod is one pod or pod template that went through the core.
type Pod struct {
	Name      string // "Kind namespace/name"
	Namespace mutate.Namespace
	Input     *corev1.Pod // the pod (or template) before mutation
	Before    []byte      // the object before mutation, as JSON
	Object    []byte      // the object after mutation, as JSON: Before when unchanged
	Patch     []byte      // JSONPatch (relative to the object, not the template)
	Result    mutate.Result
	Changed   bool
	// Unknown lists the fields of the input pod this build of k8s.io/api
	// does not know, as the apiserver's strict decoding names them.
	Unknown []string
}

// Object runs the core on the object's pod and applies the JSONPatch the
// webhook returns to the object: to a workload's template, its operations
// prefixed with the template's path. A Pod whose patch's result
// mutate.PatchResult knows is given that result instead; every output
// writes an object with its members sorted, so it prints the same.
func Object(obj input.Object, ns mutate.Namespace, set *policy.Set, opts mutate.Options) (*Pod, error) {
	p := &Pod{Name: obj.DisplayName(ns.Name), Namespace: ns, Before: obj.JSON, Object: obj.JSON}
	pod := &corev1.Pod{}
	// As the apiserver decodes: case-sensitive, and an unknown field is
	// an error under kubectl's default --validate=strict.
	strict, err := sigsjson.UnmarshalStrict(obj.Pod, pod, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("not a valid pod: %w", err)
	}
	for _, e := range strict {
		p.Unknown = append(p.Unknown, obj.FieldPath(e.Error()))
	}
	p.Input = pod
	p.Result = mutate.Pod(pod, ns, set, opts)
	if !p.Result.Changed {
		return p, nil
	}
	ops, result, err := mutate.PatchResult(obj.Pod, pod, p.Result.Pod)
	if err != nil {
		return nil, err
	}
	for i := range ops {
		ops[i].Path = obj.TemplatePath + ops[i].Path
	}
	if p.Patch, err = mutate.MarshalPatch(ops); err != nil {
		return nil, err
	}
	p.Changed = true
	if obj.TemplatePath == "" && result != nil {
		// What applying the patch gives, as a JSON value: every output
		// writes it with its members sorted.
		p.Object = result
		return p, nil
	}
	patch, err := jsonpatch.DecodePatch(p.Patch)
	if err == nil {
		p.Object, err = patch.Apply(obj.JSON)
	}
	if err != nil {
		return nil, fmt.Errorf("applying the webhook's patch: %w", err)
	}
	return p, nil
}

// NonNullPatch is p, or an empty patch ([]) for none: JSON output never
// says null.
func NonNullPatch(p []byte) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("[]")
	}
	return p
}

// Diff is the unified diff, with 3 lines of context, from a (named from)
// to b (named to).
func Diff(a, b, from, to string) (string, error) {
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: lines(a), B: lines(b), FromFile: from, ToFile: to, Context: 3})
}

// lines splits text into lines that keep their "\n".
func lines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// WriteReport prints, for one pod, which policies matched and what they did.
func WriteReport(w *ReportWriter, p *Pod) {
	r := p.Result
	w.Line("%s:", p.Name)
	for _, u := range p.Unknown {
		w.Line("  %s: the apiserver rejects it under kubectl's default --validate=strict, unless it is newer than this build and knows the field", u)
	}
	if r.PodSkipped != "" {
		w.Line("  skipped: %s", r.PodSkipped)
		return
	}
	if len(r.Policies) == 0 {
		w.Line("  no policies loaded")
	}
	for _, pr := range r.Policies {
		if !pr.Matched {
			w.Line("  %s: not matched: %s", pr.Policy, pr.Reason)
			continue
		}
		by := ""
		if b := pr.Reason.MatchedBy(); b != "" {
			by = " by " + b
		}
		w.Line("  %s: matched%s (%s, %s mode, hash %s)", pr.Policy, by, pr.Enforcement, pr.Mode, pr.Hash)
		var applied []string
		for _, d := range r.Applied {
			if d.Policy == pr.Policy {
				applied = append(applied, d.Item)
			}
		}
		verb := "injected"
		if pr.Enforcement == policy.Shadow {
			verb = "would inject (shadow)"
		}
		if len(applied) > 0 {
			w.Line("    %s: %s", verb, strings.Join(applied, ", "))
		}
		for _, d := range r.Skipped {
			if d.Policy == pr.Policy {
				w.Line("    skipped %s: %s", d.Item, d.Reason)
			}
		}
	}
	if r.Denied != "" {
		w.Line("  denied: %s", r.Denied)
	} else if !r.Changed {
		w.Line("  unchanged")
	}
	if NoMemoryRequest(r) {
		w.Line("  memory: %s", NoMemoryRequestWarning)
	}
	for _, warning := range r.Warnings {
		w.Line("Warning: %s", warning)
	}
}

// NoMemoryRequestWarning says what a pod-level memory request of 0 under a
// headroom means.
const NoMemoryRequestWarning = "the pod-level memory request is 0 under the headroom (no container requests memory and the policy sets no memory.request): " +
	"the scheduler counts no memory for this sandbox; set memory.request in the policy to what a sandbox uses"

// NoMemoryRequest reports whether an enforced policy gave the pod a
// pod-level memory headroom whose request is 0: the scheduler then counts
// no memory for it, and a node fills with such sandboxes.
func NoMemoryRequest(r mutate.Result) bool {
	if r.Pod == nil || r.Pod.Spec.Resources == nil || !slices.ContainsFunc(r.Applied, func(d mutate.Decision) bool { return d.Item == "memory/pod" && !d.Shadow }) {
		return false
	}
	q, ok := r.Pod.Spec.Resources.Requests[corev1.ResourceMemory]
	return ok && q.IsZero()
}

// ReportWriter writes dry-run's report lines. Every line has its control
// characters escaped: names and reasons come from the input, and a pod
// named "\x1b[2J" must not clear the terminal.
type ReportWriter struct{ w io.Writer }

// NewReportWriter returns a ReportWriter that writes to w.
func NewReportWriter(w io.Writer) *ReportWriter { return &ReportWriter{w} }

// Line writes one report line.
func (r *ReportWriter) Line(format string, args ...any) {
	fmt.Fprintf(r.w, "%s\n", textout.EscapeControl(fmt.Sprintf(format, args...)))
}
