package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

type dryRunOptions struct {
	policies        []string
	allowedHosts    []string
	filenames       []string
	recursive       bool
	namespace       string
	namespacesFile  string
	namespaceLabels []string
	leakMitigation  mutate.LeakMitigation
	output          string
	check           bool
	mapCompare      bool
	kubeVersion     string
	featureGates    string
}

func newDryRunCommand(streams IOStreams) *cobra.Command {
	o := &dryRunOptions{leakMitigation: mutate.LeakMitigationPolicy}
	cmd := &cobra.Command{
		Use:   "dry-run --policy PATH... -f FILE|DIR|-...",
		Short: "Apply policies to pods and workloads offline, exactly as the webhook would",
		Long: `Apply policy files to pod YAML offline through the same mutation core and the
same JSONPatch computation the webhook uses, and show the result.

Input is taken as kubectl takes it: -f FILE, -f DIR (its *.yaml, *.yml and
*.json files; -R for subdirectories) or -f - for stdin, repeatable. It may
hold several YAML or JSON documents, Lists (a kubectl get -A -o yaml dump of
a whole cluster is fine: documents and List items are read, mutated and
written one at a time, in memory bounded by the largest object), Pods, and
workloads with a pod template (Deployment, StatefulSet, DaemonSet,
ReplicaSet, ReplicationController, Job, CronJob, PodTemplate), which are
mutated in their template. Other objects pass through unchanged, and the
report says so. Pods are decoded as the apiserver decodes them: an unknown
field is named with its path. An object over 8 MiB, or YAML whose aliases
expand beyond it, is an error; so is an input with no objects.

For every pod, stderr says which policies matched, what was injected or
skipped and why, and the warnings kubectl would print (control characters
escaped). stdout carries only the -o output:
  yaml, json  the objects after mutation
  patch       the JSONPatch the webhook returns (one object: a JSON array;
              several: one {"object": ..., "patch": [...]} per line)
  diff        a unified diff of each changed object
  summary     counts for a whole fleet instead of per-pod reports: per
              policy matched, changed, skipped and why, pods whose own
              tmpfs volumes leak mitigation moves to disk, and with --check
              the predicted rejections and why

--check predicts whether the apiserver accepts the mutated pods: Pod Security
(the namespace's pod-security.kubernetes.io/enforce label, evaluated with
k8s.io/pod-security-admission), the pod-level resource rules, strict decoding
(unknown fields), and of the apiserver's pod validation unique container and
volume names, mounts of declared volumes, and non-negative requests no larger
than limits. The rest of the apiserver's pod validation
(k8s.io/kubernetes/pkg/apis/core/validation cannot be linked into this
binary) is not predicted.

Exit codes: 0 success; 1 invalid policy, unreadable or empty input or other
error; 2 bad flags or arguments; 3 --check predicts a rejection.`,
		Example: `  sandbox-webhook dry-run --policy examples/policies/memory -f examples/pods/sandbox.yaml
  kubectl get pods,deploy,jobs -A -o yaml | sandbox-webhook dry-run -p policies/ -f - --check -o summary
  kubectl get deploy web -o yaml | sandbox-webhook dry-run -p policies/ -f - -o diff
  sandbox-webhook dry-run -p policies/ -f pod.yaml --leak-mitigation=on --check \
    --namespace sandboxes --namespace-label pod-security.kubernetes.io/enforce=baseline`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.run(streams) },
	}
	f := cmd.Flags()
	flags.Policy(f, &o.policies, "")
	flags.AllowedHostPath(f, &o.allowedHosts)
	f.StringArrayVarP(&o.filenames, "filename", "f", nil, "input file, directory (its *.yaml, *.yml and *.json files), or - for stdin (repeatable)")
	f.BoolVarP(&o.recursive, "recursive", "R", false, "read the directories given with -f recursively")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of objects that do not name one (default \"default\")")
	f.StringVar(&o.namespacesFile, "namespaces", "", "YAML file of Namespace objects (kubectl get ns -o yaml) whose labels the policies and --check see")
	f.StringArrayVar(&o.namespaceLabels, "namespace-label", nil, "label key=value of the pods' namespace (repeatable; wins over --namespaces)")
	flags.LeakMitigation(f, &o.leakMitigation, "")
	f.StringVarP(&o.output, "output", "o", "yaml", "yaml, json, patch, diff or summary")
	f.BoolVar(&o.check, "check", false, "predict apiserver rejection (Pod Security, pod-level resources, unknown fields, part of pod validation); exit 3 if any")
	f.StringVar(&o.kubeVersion, "kube-version", "", "Kubernetes version of the target apiserver (1.33, v1.33.13): memory.level auto follows it, and --check predicts what it stores (before 1.34 no pod-level resources)")
	f.StringVar(&o.featureGates, "feature-gates", "", "the target apiserver's PodLevelResources=true|false and ImageVolume=true|false, when not its version's default")
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
	// unknown lists the fields of the input pod this build of k8s.io/api
	// does not know, as the apiserver's strict decoding names them.
	unknown []string
}

func (o *dryRunOptions) run(streams IOStreams) error {
	if len(o.policies) == 0 {
		return usageErrorf("--policy is required")
	}
	if len(o.filenames) == 0 {
		return usageErrorf("-f is required (a file, a directory, or - for stdin)")
	}
	switch o.output {
	case "yaml", "json", "patch", "diff", "summary":
	default:
		return usageErrorf("--output must be yaml, json, patch, diff or summary, not %q", o.output)
	}
	target, err := parseKubeTarget(o.kubeVersion, o.featureGates)
	if err != nil {
		return err
	}
	if err := policy.CheckAllowedHostPaths(o.allowedHosts); err != nil {
		return usageErrorf("%v", err)
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
	files, err := inputFiles(o.filenames, o.recursive)
	if err != nil {
		return err
	}
	set, err := policy.Load(o.policies...)
	if err == nil {
		err = policy.AllowHostPaths(set, o.allowedHosts)
	}
	if err != nil {
		return err
	}
	namespaces, err := loadNamespaces(o.namespacesFile)
	if err != nil {
		return err
	}

	out := bufio.NewWriterSize(streams.Out, 64<<10)
	errOut := bufio.NewWriterSize(streams.ErrOut, 16<<10)
	p := &pipeline{
		o:           o,
		set:         set,
		opts:        mutate.Options{LeakMitigation: o.leakMitigation, PodLevelResources: target.podLevel, ImageVolumes: target.imageVolumes},
		target:      target,
		namespaces:  namespaces,
		extraLabels: extraLabels,
		report:      &reportWriter{w: errOut},
		out:         newOutputWriter(o.output, out),
		summary:     newFleetSummary(set),
		progress:    newProgress(streams.ErrOut, o.output == "summary"),
	}
	defer tuneGC()()
	err = p.readAll(files, streams.In)
	if err == nil {
		err = p.finish(errOut)
	}
	p.progress.done()
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if ferr := errOut.Flush(); err == nil {
		err = ferr
	}
	return err
}

// readAll streams every input through the pipeline, in order.
func (p *pipeline) readAll(files []string, stdin io.Reader) error {
	for _, name := range files {
		if name == "-" {
			if err := readStream("stdin", stdin, p); err != nil {
				return err
			}
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = readStream(name, f, p)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// finish writes what needs the whole input: the end of the -o output, the
// --map comparison, the summary, and the verdicts.
func (p *pipeline) finish(errOut io.Writer) error {
	if p.objects == 0 {
		return fmt.Errorf("no objects in the input (%s): nothing to do", strings.Join(p.o.filenames, ", "))
	}
	if err := p.out.close(); err != nil {
		return err
	}
	if p.o.mapCompare {
		if err := writeMAPComparison(errOut, p.set, p.opts, p.mapPods); err != nil {
			return err
		}
	}
	if p.o.output == "summary" {
		if err := p.summary.write(p.out.writer(), p.o.check); err != nil {
			return err
		}
	}
	if p.o.check && p.rejected > 0 {
		return &exitError{code: ExitRejected, err: fmt.Errorf("--check: the apiserver would reject %d of %d pods", p.rejected, p.pods)}
	}
	return nil
}

// dryRunObject runs the core on the object's pod and writes the mutated pod
// back into the object by applying the same JSONPatch the webhook returns.
// withBefore keeps the object's YAML before mutation (for -o diff).
func dryRunObject(obj object, ns mutate.Namespace, set *policy.Set, opts mutate.Options, withBefore bool) (*dryRunPod, error) {
	p := &dryRunPod{name: displayName(obj.doc, ns.Name), ns: ns}
	if withBefore {
		before, err := marshalYAML(obj.doc)
		if err != nil {
			return nil, err
		}
		p.before = before
	}
	raw, err := obj.podJSON()
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	// As the apiserver decodes: case-sensitive, and an unknown field is
	// an error under kubectl's default --validate=strict.
	strict, err := sigsjson.UnmarshalStrict(raw, pod, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("not a valid pod: %w", err)
	}
	for _, e := range strict {
		p.unknown = append(p.unknown, obj.fieldPath(e.Error()))
	}
	p.input = pod
	p.result = mutate.Pod(pod, ns, set, opts)
	if !p.result.Changed {
		return p, nil
	}
	base, typed := obj.patchBase(raw, pod)
	ops, err := mutate.PatchEncoded(base, typed, pod, p.result.Pod)
	if err != nil {
		return nil, err
	}
	if ops, err = genericOps(ops); err != nil {
		return nil, err
	}
	// The patch is reported relative to the object, as it applies to the
	// input, and written before it is applied: its values go into the
	// object.
	reported := ops
	if obj.templatePath != "" {
		reported = slices.Clone(ops)
		for i := range reported {
			reported[i].Path = obj.templatePath + reported[i].Path
		}
	}
	opsJSON, err := json.Marshal(reported)
	if err != nil {
		return nil, err
	}
	if err := applyOps(obj.podMap(), patchOps(ops)); err != nil {
		return nil, fmt.Errorf("applying the webhook's patch: %w", err)
	}
	p.changed = true
	p.patch = opsJSON
	return p, nil
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
func writeReport(w *reportWriter, p *dryRunPod) {
	r := p.result
	w.line("%s:", p.name)
	for _, u := range p.unknown {
		w.line("  %s: the apiserver rejects it under kubectl's default --validate=strict, unless it is newer than this build and knows the field", u)
	}
	if r.PodSkipped != "" {
		w.line("  skipped: %s", r.PodSkipped)
		return
	}
	if len(r.Policies) == 0 {
		w.line("  no policies loaded")
	}
	for _, pr := range r.Policies {
		if !pr.Matched {
			w.line("  %s: not matched: %s", pr.Policy, pr.Reason)
			continue
		}
		by := ""
		if b := pr.Reason.MatchedBy(); b != "" {
			by = " by " + b
		}
		w.line("  %s: matched%s (%s, %s mode, hash %s)", pr.Policy, by, pr.Enforcement, pr.Mode, pr.Hash)
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
			w.line("    %s: %s", verb, strings.Join(applied, ", "))
		}
		for _, d := range r.Skipped {
			if d.Policy == pr.Policy {
				w.line("    skipped %s: %s", d.Item, d.Reason)
			}
		}
	}
	if r.Denied != "" {
		w.line("  denied: %s", r.Denied)
	} else if !r.Changed {
		w.line("  unchanged")
	}
	for _, warning := range r.Warnings {
		w.line("Warning: %s", warning)
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
	if err := readStream(path, f, namespaceCollector(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// namespaceCollector is a visitor that records the labels of every
// Namespace it sees.
type namespaceCollector map[string]map[string]string

func (c namespaceCollector) add(v any) {
	doc, ok := v.(map[string]any)
	if !ok {
		return
	}
	if isList(doc) {
		for _, it := range doc["items"].([]any) {
			c.add(it)
		}
		return
	}
	if doc["kind"] != "Namespace" {
		return
	}
	b, _ := json.Marshal(doc)
	var ns corev1.Namespace
	if json.Unmarshal(b, &ns) == nil && ns.Name != "" {
		c[ns.Name] = ns.Labels
	}
}

func (c namespaceCollector) object(_ position, doc map[string]any) error {
	c.add(doc)
	return nil
}
func (c namespaceCollector) listStart(position, map[string]any) error { return nil }
func (c namespaceCollector) listItem(_ position, item any) error {
	c.add(item)
	return nil
}
func (c namespaceCollector) listEnd(position, map[string]any) error { return nil }
