package dryrun

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/predict"
	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// pipeline is dry-run's input-to-output path: every object is read, mutated,
// reported and written in order, the reading and writing a few objects
// ahead and behind (ahead.go), so memory does not grow with the number of
// objects.
type pipeline struct {
	o           *dryRunOptions
	set         *policy.Set
	opts        mutate.Options
	target      predict.Target // --kube-version, --feature-gates
	namespaces  map[string]map[string]string
	extraLabels map[string]string
	report      *preview.ReportWriter
	out         outputWriter
	summary     *fleetSummary
	progress    *progress

	objects, pods, rejected int
	lists                   int // Lists read, empty ones included
	// unknownNamespaces are the namespaces already reported as missing
	// from --namespaces.
	unknownNamespaces map[string]bool
	// mapPods are kept for --map only, which compares them at the end.
	mapPods []*preview.Pod
	// listKind is the kind named in the head of the open List.
	listKind string
	// flush, called after each object, writes out its report and output
	// before the next object's when stdout and stderr are the same file;
	// otherwise it does nothing.
	flush func() error
}

// streamingGCPercent is the GOGC dry-run runs with unless GOGC is set.
// The pipeline's live heap is one object, the policies and the Pod Security
// checks, a few MiB, while every object allocates about a hundred times
// its size in decoded values: with the default GOGC=100 the collector ran
// every few objects and took a fifth of the CPU. At 300 it runs a third as
// often; the heap still tracks the live heap (at most four times it), so
// memory stays flat with the number of objects.
const streamingGCPercent = 300

// tuneGC sets streamingGCPercent and returns what restores the setting.
func tuneGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(streamingGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// quiet reports whether per-object reports are left out (-o summary).
func (p *pipeline) quiet() bool { return p.o.output == "summary" }

func (p *pipeline) Object(pos input.Position, obj input.Object) error {
	js, err := p.process(pos, obj)
	if err != nil {
		return err
	}
	if err := p.out.object(js); err != nil {
		return err
	}
	return p.flush()
}

func (p *pipeline) ListStart(_ input.Position, head map[string]any) error {
	p.lists++
	p.listKind, _ = head["kind"].(string)
	return p.out.listStart(head)
}

func (p *pipeline) ListItem(pos input.Position, item input.Object) error {
	js := item.JSON
	if item.IsObject() {
		var err error
		if js, err = p.process(pos, item); err != nil {
			return err
		}
	} else {
		p.objects++
		p.note("%s: not an object: passed through unchanged", pos)
	}
	if err := p.out.listItem(js); err != nil {
		return err
	}
	return p.flush()
}

func (p *pipeline) ListEnd(pos input.Position, tail map[string]any) error {
	kind := p.listKind
	if k, ok := tail["kind"].(string); ok {
		kind = k
	}
	if !strings.HasSuffix(kind, "List") {
		return fmt.Errorf("%s: has an items list but its kind %q is not a List", pos, kind)
	}
	return p.out.listEnd(tail)
}

// note prints a line about an object that is not a pod.
func (p *pipeline) note(format string, args ...any) {
	if !p.quiet() {
		p.report.Line(format, args...)
	}
}

// podKinds are the kinds dry-run mutates, for the hint on a miscased kind.
var podKinds = append(slices.Sorted(maps.Keys(input.TemplatePaths)), "Pod")

// process runs one object through the core, reports it, and returns it
// as it is to be written.
func (p *pipeline) process(pos input.Position, obj input.Object) ([]byte, error) {
	p.objects++
	p.progress.tick(p.objects)
	if obj.IsList() {
		// A List inside a List: kubectl flattens it, so its items are
		// mutated in place, within the object that holds them.
		items := obj.Items()
		p.note("%s: a %s inside a List: its %d items are mutated in place", obj.DisplayName(""), obj.Kind, len(items))
		p.summary.nestedLists++
		for i, it := range items {
			ipos := pos
			ipos.Item = i + 1
			if item := input.Classify(it); item.IsObject() {
				js, err := p.process(ipos, item)
				if err != nil {
					return nil, err
				}
				items[i] = js
			}
		}
		return withItems(obj.JSON, items)
	}
	if !obj.HasPod() {
		p.passThrough(pos, obj)
		return obj.JSON, nil
	}
	ns, err := p.namespaceOf(obj)
	if err != nil {
		return nil, err
	}
	dp, err := preview.Object(obj, ns, p.set, p.opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", pos, obj.DisplayName(ns.Name), err)
	}
	p.pods++
	if !p.quiet() {
		preview.WriteReport(p.report, dp)
	}
	var problems []string
	if p.o.predict {
		verdict := predict.Pod(dp, p.target)
		if problems = verdict.Problems; len(problems) > 0 {
			p.rejected++
		}
		if !p.quiet() {
			verdict.Write(p.report, dp.Name)
		}
	}
	p.summary.add(dp, problems)
	if p.o.mapCompare {
		p.mapPods = append(p.mapPods, dp)
	}
	return dp.Object, p.out.pod(dp)
}

// withItems returns the List list with items in place of its own.
func withItems(list []byte, items []json.RawMessage) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(list, &fields); err != nil {
		return nil, err
	}
	b, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	fields["items"] = b
	return json.Marshal(fields)
}

// passThrough says why an object is left as it is.
func (p *pipeline) passThrough(pos input.Position, obj input.Object) {
	kind := obj.Kind
	name := obj.DisplayName(cmp.Or(obj.Namespace, p.o.namespace, "default"))
	p.summary.passed++
	for _, k := range podKinds {
		if kind != k && strings.EqualFold(kind, k) {
			p.note("%s: kind %q is not %q (kinds are case-sensitive; the apiserver knows no %q): passed through unchanged", name, kind, k, kind)
			if p.o.predict {
				p.rejected++
				var w *preview.ReportWriter
				if !p.quiet() {
					w = p.report
				}
				p.summary.reject(predict.UnknownKind(w, name, kind, k))
			}
			return
		}
	}
	if kind == "" {
		p.note("%s: an object without a kind: passed through unchanged", pos)
	} else {
		p.note("%s: not a pod or a workload with a pod template: passed through unchanged", name)
	}
}

// namespaceOf resolves the namespace of an object: its own, else --namespace,
// else "default"; an object naming a namespace other than --namespace is an
// error, as with kubectl.
func (p *pipeline) namespaceOf(obj input.Object) (mutate.Namespace, error) {
	o := p.o
	name := obj.Namespace
	switch {
	case name == "" && o.namespace != "":
		name = o.namespace
	case name == "":
		name = "default"
	case o.namespace != "" && name != o.namespace:
		return mutate.Namespace{}, command.UsageErrorf("%s is in namespace %q, not --namespace %q", obj.DisplayName(""), name, o.namespace)
	}
	known, ok := p.namespaces[name]
	if !ok && o.namespacesFile != "" && !p.unknownNamespaces[name] {
		p.unknownNamespaces[name] = true
		p.summary.unknownNamespaces++
		p.note("note: namespace %q is not in --namespaces %s: the policies and --predict see none of its labels (namespaceSelector, Pod Security) but its name", name, o.namespacesFile)
	}
	labels := make(map[string]string, len(known)+len(p.extraLabels)+1)
	labels["kubernetes.io/metadata.name"] = name
	maps.Copy(labels, known)
	maps.Copy(labels, p.extraLabels)
	return mutate.Namespace{Name: name, Labels: labels}, nil
}

// outputWriter writes the -o output as the objects come, each as JSON. The
// writers write to a renderer, which keeps the first error: its sync at the
// end of the run returns it, so single writes need not be checked.
type outputWriter interface {
	object(js []byte) error
	listStart(head map[string]any) error
	listItem(js []byte) error
	listEnd(tail map[string]any) error
	pod(p *preview.Pod) error
	close() error
}

func newOutputWriter(format string, w *renderer) outputWriter {
	switch format {
	case "yaml":
		return &yamlOutput{w: w}
	case "json":
		return &jsonOutput{w: w}
	case "patch":
		return &patchOutput{w: w}
	case "diff":
		return &diffOutput{w: w}
	}
	return noOutput{} // -o summary prints the fleet summary at the end
}

// noOutput writes nothing; the writers embed it for the calls they ignore.
type noOutput struct{}

func (noOutput) object([]byte) error            { return nil }
func (noOutput) listStart(map[string]any) error { return nil }
func (noOutput) listItem([]byte) error          { return nil }
func (noOutput) listEnd(map[string]any) error   { return nil }
func (noOutput) pod(*preview.Pod) error         { return nil }
func (noOutput) close() error                   { return nil }

// splitHead returns the members of a List's head whose keys sort before
// "items" and those whose keys sort after it.
func splitHead(m map[string]any) (before, after map[string]any) {
	before, after = maps.Clone(m), maps.Clone(m)
	maps.DeleteFunc(before, func(k string, _ any) bool { return k >= "items" })
	maps.DeleteFunc(after, func(k string, _ any) bool { return k <= "items" })
	return before, after
}

// itemsKey starts a List's items in YAML.
const itemsKey = "items:\n"

// yamlOutput prints documents separated by "---", a List as one document
// whose items are written as they come: byte for byte what writing the
// whole List gives (keys in order, "items" at its place), because each item
// is written as the one item of an items key, at the column it has in the
// List.
type yamlOutput struct {
	noOutput
	w     *renderer
	docs  int
	items int
	after map[string]any
}

func (y *yamlOutput) separate() {
	if y.docs > 0 {
		_, _ = y.w.WriteString("---\n")
	}
	y.docs++
}

func (y *yamlOutput) object(js []byte) error {
	y.separate()
	return y.write(js)
}

func (y *yamlOutput) write(js []byte) error {
	y.w.render(func() ([]byte, error) { return textout.YAML(js) })
	return nil
}

func (y *yamlOutput) marshal(m map[string]any) error {
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return y.write(js)
}

func (y *yamlOutput) listStart(head map[string]any) error {
	y.separate()
	before, after := splitHead(head)
	y.items, y.after = 0, after
	if len(before) == 0 {
		return nil
	}
	return y.marshal(before)
}

func (y *yamlOutput) listItem(js []byte) error {
	if y.items == 0 {
		_, _ = y.w.WriteString(itemsKey)
	}
	y.items++
	y.w.render(func() ([]byte, error) {
		b, err := textout.YAML(slices.Concat([]byte(`{"items":[`), js, []byte(`]}`)))
		if err != nil {
			return nil, err
		}
		return b[len(itemsKey):], nil
	})
	return nil
}

// listEnd writes the keys after "items". Keys that sort before "items" but
// come after the items in the input (unusual: kubectl writes apiVersion
// first) are written here too, as they cannot be moved back.
func (y *yamlOutput) listEnd(tail map[string]any) error {
	if y.items == 0 {
		_, _ = y.w.WriteString("items: []\n")
	}
	maps.Copy(y.after, tail)
	if len(y.after) == 0 {
		return nil
	}
	return y.marshal(y.after)
}

// jsonOutput prints each document as indented JSON, keys sorted; a List is
// written as its items come, exactly as json.MarshalIndent of the whole
// List.
type jsonOutput struct {
	noOutput
	w     *renderer
	items int
	after map[string]any
}

// indented is js as json.MarshalIndent writes its value at prefix.
func indented(js []byte, prefix string) ([]byte, error) {
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	return json.MarshalIndent(v, prefix, "  ")
}

func (j *jsonOutput) object(js []byte) error {
	j.w.render(func() ([]byte, error) {
		b, err := indented(js, "")
		return append(b, '\n'), err
	})
	return nil
}

func (j *jsonOutput) field(k string, v any) error {
	key, err := json.Marshal(k)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(j.w, "  %s: %s", key, b)
	return err
}

func (j *jsonOutput) listStart(head map[string]any) error {
	before, after := splitHead(head)
	j.items, j.after = 0, after
	_, _ = j.w.WriteString("{\n")
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if err := j.field(k, head[k]); err != nil {
			return err
		}
		_, _ = j.w.WriteString(",\n")
	}
	_, err := j.w.WriteString(`  "items": [`)
	return err
}

func (j *jsonOutput) listItem(js []byte) error {
	if j.items > 0 {
		_, _ = j.w.WriteString(",")
	}
	j.items++
	j.w.render(func() ([]byte, error) {
		b, err := indented(js, "    ")
		return append([]byte("\n    "), b...), err
	})
	return nil
}

func (j *jsonOutput) listEnd(tail map[string]any) error {
	if j.items > 0 {
		_, _ = j.w.WriteString("\n  ]")
	} else {
		_, _ = j.w.WriteString("]")
	}
	maps.Copy(j.after, tail)
	before, after := splitHead(j.after)
	for _, k := range append(slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before))...) { // before: see yamlOutput.listEnd
		_, _ = j.w.WriteString(",\n")
		if err := j.field(k, j.after[k]); err != nil {
			return err
		}
	}
	_, err := j.w.WriteString("\n}\n")
	return err
}

// patchOutput prints the JSONPatch of one pod as a JSON array, of several
// one {"object": ..., "patch": [...]} per line. Until a second pod comes,
// the first is held back.
type patchOutput struct {
	noOutput
	w       *renderer
	n       int
	pending patchLine
}

type patchLine struct {
	Object string          `json:"object"`
	Patch  json.RawMessage `json:"patch"`
}

func (p *patchOutput) pod(dp *preview.Pod) error {
	line := patchLine{Object: dp.Name, Patch: preview.NonNullPatch(dp.Patch)}
	p.n++
	switch p.n {
	case 1:
		p.pending = line
		return nil
	case 2:
		if err := json.NewEncoder(p.w).Encode(p.pending); err != nil {
			return err
		}
		p.pending = patchLine{}
	}
	return json.NewEncoder(p.w).Encode(line)
}

// close writes the patch of a single pod as an indented JSON array.
func (p *patchOutput) close() error {
	if p.n != 1 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, p.pending.Patch, "", "  "); err != nil {
		return err
	}
	_, err := fmt.Fprintf(p.w, "%s\n", b.Bytes())
	return err
}

// diffOutput prints a unified diff of every changed pod object, one by one.
type diffOutput struct {
	noOutput
	w *renderer
}

func (d *diffOutput) pod(p *preview.Pod) error {
	if p.Changed {
		d.w.render(func() ([]byte, error) { return diff(p) })
	}
	return nil
}

func diff(p *preview.Pod) ([]byte, error) {
	before, err := textout.YAML(p.Before)
	if err != nil {
		return nil, err
	}
	after, err := textout.YAML(p.Object)
	if err != nil {
		return nil, err
	}
	name := textout.EscapeControl(p.Name)
	d, err := preview.Diff(string(before), string(after), "a/"+name, "b/"+name)
	return []byte(d), err
}

// progress shows a count of objects on a terminal's stderr when the
// per-object report is off (-o summary) and the input is large.
type progress struct {
	w     io.Writer // nil: not shown
	shown bool
}

func newProgress(w io.Writer, wanted bool) *progress {
	if f, ok := w.(*os.File); ok && wanted {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return &progress{w: w}
		}
	}
	return &progress{}
}

func (p *progress) tick(n int) {
	if p.w != nil && n%1000 == 0 {
		fmt.Fprintf(p.w, "\rdry-run: %d objects read", n)
		p.shown = true
	}
}

func (p *progress) done() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
