package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

type dryRunOptions struct {
	policies        []string
	filename        string
	namespace       string
	namespacesFile  string
	namespaceLabels []string
	leakMitigation  string
	output          string
	check           bool
	mapCompare      bool
}

func newDryRunCommand(streams IOStreams) *cobra.Command {
	o := &dryRunOptions{}
	cmd := &cobra.Command{
		Use:   "dry-run --policy PATH... -f FILE|-",
		Short: "Apply policies to pods and workloads offline, exactly as the webhook would",
		Long: `Apply policy files to pod YAML offline through the same mutation core and the
same JSONPatch computation the webhook uses, and show the result.

Input (-f FILE, or - for stdin) may hold several YAML or JSON documents, Lists,
Pods, and workloads with a pod template (Deployment, StatefulSet, DaemonSet,
ReplicaSet, ReplicationController, Job, CronJob, PodTemplate), which are
mutated in their template. Other objects pass through unchanged.

For every pod, stderr says which policies matched, what was injected or
skipped and why, and the warnings kubectl would print. stdout carries only
the -o output:
  yaml, json  the objects after mutation
  patch       the JSONPatch the webhook returns (one object: a JSON array;
              several: one {"object": ..., "patch": [...]} per line)
  diff        a unified diff of each changed object

--check predicts whether the apiserver accepts the mutated pods: Pod Security
(the namespace's pod-security.kubernetes.io/enforce label, evaluated with
k8s.io/pod-security-admission) and the pod-level resource rules.

Exit codes: 0 success; 1 invalid policy, unreadable input or other error;
2 bad flags or arguments; 3 --check predicts a rejection.`,
		Example: `  sandbox-webhook dry-run --policy examples/policies/memory -f examples/pods/sandbox.yaml
  kubectl get deploy web -o yaml | sandbox-webhook dry-run -p policies/ -f - -o diff
  sandbox-webhook dry-run -p policies/ -f pod.yaml --leak-mitigation=on --check \
    --namespace sandboxes --namespace-label pod-security.kubernetes.io/enforce=baseline`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.run(streams) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.policies, "policy", "p", nil, "policy file or directory (repeatable)")
	f.StringVarP(&o.filename, "filename", "f", "", "input file, or - for stdin")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of objects that do not name one (default \"default\")")
	f.StringVar(&o.namespacesFile, "namespaces", "", "YAML file of Namespace objects (kubectl get ns -o yaml) whose labels the policies and --check see")
	f.StringArrayVar(&o.namespaceLabels, "namespace-label", nil, "label key=value of the pods' namespace (repeatable; wins over --namespaces)")
	f.StringVar(&o.leakMitigation, "leak-mitigation", "policy", "on (every policy disk-backed), off (every policy memory-backed) or policy")
	f.StringVarP(&o.output, "output", "o", "yaml", "yaml, json, patch or diff")
	f.BoolVar(&o.check, "check", false, "predict apiserver rejection (Pod Security, pod-level resources); exit 3 if any")
	f.BoolVar(&o.mapCompare, "map", false, "also run the policies as export-map's MutatingAdmissionPolicies and report their result next to the webhook's")
	return cmd
}

// pod is one pod or pod template that went through the core.
type dryRunPod struct {
	name    string // "Kind namespace/name"
	ns      mutate.Namespace
	input   *corev1.Pod // the pod (or template) before mutation
	before  []byte      // the object before mutation, as YAML (for diff)
	patch   []byte      // JSONPatch (relative to the object, not the template)
	result  mutate.Result
	changed bool
}

func (o *dryRunOptions) run(streams IOStreams) error {
	if len(o.policies) == 0 {
		return usageErrorf("--policy is required")
	}
	if o.filename == "" {
		return usageErrorf("-f is required (a file, or - for stdin)")
	}
	switch o.output {
	case "yaml", "json", "patch", "diff":
	default:
		return usageErrorf("--output must be yaml, json, patch or diff, not %q", o.output)
	}
	lm, ok := mutate.ParseLeakMitigation(o.leakMitigation)
	if !ok {
		return usageErrorf("--leak-mitigation must be on, off or policy, not %q", o.leakMitigation)
	}
	if o.mapCompare {
		if err := mapRunnerMissing(); err != nil {
			return err
		}
	}
	extraLabels, err := parseLabels(o.namespaceLabels)
	if err != nil {
		return err
	}
	set, err := policy.Load(o.policies...)
	if err != nil {
		return err
	}
	namespaces, err := loadNamespaces(o.namespacesFile)
	if err != nil {
		return err
	}
	docs, err := o.readInput(streams.In)
	if err != nil {
		return err
	}

	opts := mutate.Options{LeakMitigation: lm}
	var pods []*dryRunPod
	for _, doc := range docs {
		items := []map[string]any{doc}
		if isList(doc) {
			items = items[:0]
			for _, it := range doc["items"].([]any) {
				if m, ok := it.(map[string]any); ok {
					items = append(items, m)
				}
			}
		}
		for _, it := range items {
			obj := classify(it)
			if !obj.hasPod() {
				continue
			}
			ns, err := o.namespaceOf(it, namespaces, extraLabels)
			if err != nil {
				return err
			}
			p, err := dryRunObject(obj, ns, set, opts)
			if err != nil {
				return fmt.Errorf("%s: %w", displayName(it, ns.Name), err)
			}
			pods = append(pods, p)
		}
	}

	for _, p := range pods {
		writeReport(streams.ErrOut, p)
	}
	if o.mapCompare {
		if err := writeMAPComparison(streams.ErrOut, set, opts, pods); err != nil {
			return err
		}
	}
	if err := o.writeOutput(streams.Out, docs, pods); err != nil {
		return err
	}
	if o.check {
		rejected := 0
		for _, p := range pods {
			rejected += checkPod(streams.ErrOut, p)
		}
		if rejected > 0 {
			return &exitError{code: ExitRejected, err: fmt.Errorf("--check: the apiserver would reject %d of %d pods", rejected, len(pods))}
		}
	}
	return nil
}

func (o *dryRunOptions) readInput(stdin io.Reader) ([]map[string]any, error) {
	if o.filename == "-" {
		return readDocuments(stdin)
	}
	f, err := os.Open(o.filename)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	docs, err := readDocuments(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.filename, err)
	}
	return docs, nil
}

// namespaceOf resolves the namespace of an object: its own, else --namespace,
// else "default"; an object naming a namespace other than --namespace is an
// error, as with kubectl.
func (o *dryRunOptions) namespaceOf(doc map[string]any, known map[string]map[string]string, extra map[string]string) (mutate.Namespace, error) {
	md, _ := doc["metadata"].(map[string]any)
	name, _ := md["namespace"].(string)
	switch {
	case name == "" && o.namespace != "":
		name = o.namespace
	case name == "":
		name = "default"
	case o.namespace != "" && name != o.namespace:
		return mutate.Namespace{}, usageErrorf("%s is in namespace %q, not --namespace %q", displayName(doc, ""), name, o.namespace)
	}
	labels := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range known[name] {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	return mutate.Namespace{Name: name, Labels: labels}, nil
}

// dryRunObject runs the core on the object's pod and writes the mutated pod
// back into the object by applying the same JSONPatch the webhook returns.
func dryRunObject(obj object, ns mutate.Namespace, set *policy.Set, opts mutate.Options) (*dryRunPod, error) {
	p := &dryRunPod{name: displayName(obj.doc, ns.Name), ns: ns}
	before, err := yaml.Marshal(obj.doc)
	if err != nil {
		return nil, err
	}
	p.before = before
	raw, err := obj.podJSON()
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		return nil, fmt.Errorf("not a valid pod: %w", err)
	}
	p.input = pod
	p.result = mutate.Pod(pod, ns, set, opts)
	if !p.result.Changed {
		return p, nil
	}
	ops, err := mutate.Patch(raw, pod, p.result.Pod)
	if err != nil {
		return nil, err
	}
	opsJSON, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(opsJSON)
	if err != nil {
		return nil, err
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("applying the webhook's patch: %w", err)
	}
	if err := obj.setPod(patched); err != nil {
		return nil, err
	}
	p.changed = true
	// Report the patch relative to the object, as it applies to the input.
	if obj.templatePath != "" {
		for i := range ops {
			ops[i].Path = obj.templatePath + ops[i].Path
		}
		if opsJSON, err = json.Marshal(ops); err != nil {
			return nil, err
		}
	}
	p.patch = opsJSON
	return p, nil
}

func (o *dryRunOptions) writeOutput(w io.Writer, docs []map[string]any, pods []*dryRunPod) error {
	switch o.output {
	case "yaml":
		for i, d := range docs {
			b, err := yaml.Marshal(d)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
	case "json":
		for _, d := range docs {
			b, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\n", b)
		}
	case "patch":
		if len(pods) == 1 {
			return writePatch(w, pods[0].patch)
		}
		for _, p := range pods {
			line, err := json.Marshal(struct {
				Object string          `json:"object"`
				Patch  json.RawMessage `json:"patch"`
			}{p.name, nonNullPatch(p.patch)})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\n", line)
		}
	case "diff":
		return writeDiffs(w, docs, pods)
	}
	return nil
}

func nonNullPatch(p []byte) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("[]")
	}
	return p
}

func writePatch(w io.Writer, p []byte) error {
	var ops []any
	if err := json.Unmarshal(nonNullPatch(p), &ops); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ops, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeDiffs prints a unified diff of every changed pod object. Objects in
// a List are diffed one by one.
func writeDiffs(w io.Writer, docs []map[string]any, pods []*dryRunPod) error {
	_ = docs
	for _, p := range pods {
		if !p.changed {
			continue
		}
		after, err := afterYAML(p)
		if err != nil {
			return err
		}
		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A:        lines(p.before),
			B:        lines(after),
			FromFile: "a/" + p.name,
			ToFile:   "b/" + p.name,
			Context:  3,
		})
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, diff); err != nil {
			return err
		}
	}
	return nil
}

// lines splits text into lines that keep their "\n".
func lines(b []byte) []string {
	out := strings.SplitAfter(string(b), "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// afterYAML re-derives the mutated object's YAML from its before-YAML and
// patch, so diff shows exactly what the patch does.
func afterYAML(p *dryRunPod) ([]byte, error) {
	js, err := yaml.YAMLToJSON(p.before)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(p.patch)
	if err != nil {
		return nil, err
	}
	out, err := patch.Apply(js)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(out)
}

// writeReport prints, for one pod, which policies matched and what they did.
func writeReport(w io.Writer, p *dryRunPod) {
	r := p.result
	fmt.Fprintf(w, "%s:\n", p.name)
	if r.PodSkipped != "" {
		fmt.Fprintf(w, "  skipped: %s\n", r.PodSkipped)
		return
	}
	if len(r.Policies) == 0 {
		fmt.Fprintln(w, "  no policies loaded")
	}
	for _, pr := range r.Policies {
		if !pr.Matched {
			fmt.Fprintf(w, "  %s: not matched: %s\n", pr.Policy, pr.Reason)
			continue
		}
		fmt.Fprintf(w, "  %s: matched (%s, %s mode, hash %s)\n", pr.Policy, pr.Enforcement, pr.Mode, pr.Hash)
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
			fmt.Fprintf(w, "    %s: %s\n", verb, strings.Join(applied, ", "))
		}
		for _, d := range r.Skipped {
			if d.Policy == pr.Policy {
				fmt.Fprintf(w, "    skipped %s: %s\n", d.Item, d.Reason)
			}
		}
	}
	if !r.Changed {
		fmt.Fprintln(w, "  unchanged")
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", warning)
	}
}

func parseLabels(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--namespace-label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// loadNamespaces reads Namespace objects (a Namespace, a NamespaceList or a
// List, in one or more documents) into name → labels.
func loadNamespaces(path string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	docs, err := readDocuments(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var add func(doc map[string]any)
	add = func(doc map[string]any) {
		if isList(doc) {
			for _, it := range doc["items"].([]any) {
				if m, ok := it.(map[string]any); ok {
					add(m)
				}
			}
			return
		}
		if doc["kind"] != "Namespace" {
			return
		}
		b, _ := json.Marshal(doc)
		var ns corev1.Namespace
		if json.Unmarshal(b, &ns) == nil && ns.Name != "" {
			out[ns.Name] = ns.Labels
		}
	}
	for _, d := range docs {
		add(d)
	}
	return out, nil
}
