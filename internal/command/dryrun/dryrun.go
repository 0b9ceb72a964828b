// Package dryrun is the dry-run command: policies applied offline to the
// pods, workloads and Lists -f names, streamed, with the webhook's own
// mutation and patch; --predict predicts the apiserver's verdict
// (internal/predict) and --map compares the exported
// MutatingAdmissionPolicies.
package dryrun

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/predict"
	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
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
	predict         bool
	mapCompare      bool
	statusAlways    bool
	kubeVersion     string
	featureGates    string
}

// NewCommand returns the dry-run command.
func NewCommand(streams command.IOStreams) *cobra.Command {
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
              tmpfs volumes leak mitigation moves to disk, and with --predict
              the predicted rejections and why

--predict predicts whether the apiserver accepts the mutated pods: Pod Security
(the namespace's pod-security.kubernetes.io/enforce label, evaluated with
k8s.io/pod-security-admission), the pod-level resource rules, strict decoding
(unknown fields), and of the apiserver's pod validation unique container and
volume names, mounts of declared volumes, and non-negative requests no larger
than limits. The rest of the apiserver's pod validation
(k8s.io/kubernetes/pkg/apis/core/validation cannot be linked into this
binary) is not predicted.

Exit codes: 0 success; 1 invalid policy, unreadable or empty input or other
error; 2 bad flags or arguments; 3 --predict predicts a rejection.`,
		Example: `  kubectl-sandbox_webhook dry-run --policy examples/policies/memory -f examples/pods/sandbox.yaml
  kubectl get pods,deploy,jobs -A -o yaml | kubectl-sandbox_webhook dry-run -p policies/ -f - --predict -o summary
  kubectl get deploy web -o yaml | kubectl-sandbox_webhook dry-run -p policies/ -f - -o diff
  kubectl-sandbox_webhook dry-run -p policies/ -f pod.yaml --leak-mitigation=on --predict \
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
	f.StringVar(&o.namespacesFile, "namespaces", "", "a YAML file (or a directory of them) of Namespace objects (kubectl get ns -o yaml) whose labels the policies and --predict see")
	f.StringArrayVar(&o.namespaceLabels, "namespace-label", nil, "label key=value of the pods' namespace (repeatable; wins over --namespaces)")
	flags.LeakMitigation(f, &o.leakMitigation, "")
	f.StringVarP(&o.output, "output", "o", "yaml", "yaml, json, patch, diff or summary")
	const predictUsage = "predict apiserver rejection (Pod Security, pod-level resources, unknown fields, part of pod validation); exit 3 if any"
	f.BoolVar(&o.predict, "predict", false, predictUsage)
	// --check was its first name (check is also a command): it still
	// works, hidden, and says to use --predict, on stderr as kubectl does,
	// not on stdout among the objects.
	f.BoolVar(&o.predict, "check", false, predictUsage)
	_ = f.MarkDeprecated("check", "use --predict instead")
	f.SetOutput(streams.ErrOut)
	f.StringVar(&o.kubeVersion, "kube-version", "", "Kubernetes version of the target apiserver (1.33, v1.33.13): memory.level auto follows it, and --predict predicts what it stores (before 1.34 no pod-level resources)")
	f.StringVar(&o.featureGates, "feature-gates", "", "the target apiserver's PodLevelResources=true|false and ImageVolume=true|false, when not its version's default")
	f.BoolVar(&o.statusAlways, "status-always", false, "as serve --status-always (the chart's webhook.guard, on by default): the status annotation on every pod, also one no policy changes")
	f.BoolVar(&o.mapCompare, "map", false, "also run the policies as export-map's MutatingAdmissionPolicies and report their result next to the webhook's")
	return cmd
}

func (o *dryRunOptions) run(streams command.IOStreams) error {
	if len(o.policies) == 0 {
		return command.UsageErrorf("--policy is required")
	}
	if len(o.filenames) == 0 {
		return command.UsageErrorf("-f is required (a file, a directory, or - for stdin)")
	}
	switch o.output {
	case "yaml", "json", "patch", "diff", "summary":
	default:
		return command.UsageErrorf("--output must be yaml, json, patch, diff or summary, not %q", o.output)
	}
	target, err := predict.ParseTarget(o.kubeVersion, o.featureGates)
	if err != nil {
		return command.UsageErrorf("%v", err)
	}
	if err := policy.CheckAllowedHostPaths(o.allowedHosts); err != nil {
		return command.UsageErrorf("%v", err)
	}
	extraLabels, err := parseLabels(o.namespaceLabels)
	if err != nil {
		return err
	}
	files, err := input.Files(o.filenames, o.recursive)
	if errors.Is(err, input.ErrStdinTwice) {
		return command.UsageErrorf("%v", err)
	}
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
	namespaces, err := input.LoadNamespaces(o.namespacesFile)
	if err != nil {
		return err
	}

	out := bufio.NewWriterSize(streams.Out, 64<<10)
	errOut := bufio.NewWriterSize(streams.ErrOut, 16<<10)
	rendered := newRenderer(out)
	defer rendered.stop()
	p := &pipeline{
		o:                 o,
		set:               set,
		opts:              mutate.Options{LeakMitigation: o.leakMitigation, PodLevelResources: target.PodLevel, ImageVolumes: target.ImageVolumes, StatusAlways: o.statusAlways},
		target:            target,
		namespaces:        namespaces,
		extraLabels:       extraLabels,
		unknownNamespaces: map[string]bool{},
		report:            preview.NewReportWriter(errOut),
		out:               newOutputWriter(o.output, rendered),
		summary:           newFleetSummary(set),
		progress:          newProgress(streams.ErrOut, o.output == "summary"),
		flush:             func() error { return nil },
	}
	if sameFile(streams.Out, streams.ErrOut) {
		// A terminal, or 2>&1: each pod's report comes with its output,
		// as the README shows it, not all reports after all objects.
		p.flush = func() error { return cmp.Or(rendered.sync(), errOut.Flush(), out.Flush()) }
	}
	defer tuneGC()()
	err = p.readAll(files, streams.In)
	if err == nil {
		err = p.finish(rendered, out, errOut)
	}
	p.progress.done()
	return cmp.Or(err, rendered.sync(), out.Flush(), errOut.Flush())
}

// readAll streams every input through the pipeline, in order.
func (p *pipeline) readAll(files []string, stdin io.Reader) error {
	for _, name := range files {
		read := func(v input.Visitor) error { return input.ReadFile(name, v) }
		if name == "-" {
			read = func(v input.Visitor) error { return input.ReadStream("stdin", stdin, v) }
		}
		if err := readAhead(read, p); err != nil {
			return err
		}
	}
	return nil
}

// finish writes what needs the whole input: the end of the -o output, the
// --map comparison, the summary, and the verdicts.
func (p *pipeline) finish(rendered *renderer, out, errOut io.Writer) error {
	if p.objects == 0 && p.lists == 0 {
		return fmt.Errorf("no objects in the input (%s): nothing to do", strings.Join(p.o.filenames, ", "))
	}
	if p.objects == 0 && !p.quiet() {
		// kubectl get of an empty namespace: zero pods, not a mistake.
		p.report.Line("the input's Lists hold no items: nothing to mutate")
	}
	if err := cmp.Or(p.out.close(), rendered.sync()); err != nil {
		return err
	}
	if p.o.mapCompare {
		if err := writeMAPComparison(errOut, p.set, p.opts, p.mapPods); err != nil {
			return err
		}
	}
	if p.o.output == "summary" {
		p.summary.write(out, p.o.predict)
	}
	// "--predict:", the flag's name (--check is its deprecated alias).
	if p.o.predict && p.rejected > 0 {
		return &command.ExitCodeError{Code: command.ExitRejected, Err: fmt.Errorf("--predict: the apiserver would reject %d of %d pods", p.rejected, p.pods)}
	}
	return nil
}

func parseLabels(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, command.UsageErrorf("--namespace-label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// sameFile reports whether a and b are one open file (a terminal, or
// stdout and stderr redirected together).
func sameFile(a, b io.Writer) bool {
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 {
		return false
	}
	sa, err1 := fa.Stat()
	sb, err2 := fb.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
