// Package check is the check command: on a live cluster, whether a pod
// (or one about to be created) reaches the webhook and is mutated as the
// policies say, and, as check install, whether the installation serves.
package check

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport/maprun"
	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// chartNameLabel marks the objects the chart installs.
const chartNameLabel = "app.kubernetes.io/name=sandbox-webhook"

type clusterCheckOptions struct {
	kubeconfig, context, namespace string
	policies                       []string
	configuration                  string
	releaseNamespace               string
	leakMitigation                 mutate.LeakMitigation // "": the release's
	filename                       string
	output                         string
	statusURL                      string // the server's /status
}

// NewCommand returns the check command.
func NewCommand(streams command.IOStreams) *cobra.Command {
	o := &clusterCheckOptions{}
	cmd := &cobra.Command{
		Use:   "check (pod NAME | deployment NAME | -f FILE)",
		Short: "Say why a pod on the cluster did or did not get its injection",
		Long: `Read the pod (or the pod a Deployment would create, or one from -f) and its
namespace from the cluster in the current kubeconfig context, and say:

- for every installed sandbox-webhook MutatingWebhookConfiguration (label
  ` + chartNameLabel + `, or --configuration), whether the apiserver sends
  the pod's CREATE to the webhook (rules, namespaceSelector, objectSelector,
  and matchConditions with the apiserver's CEL matcher), and the fix when
  it does not;
- which policies select the pod and what they inject, with the reasons
  dry-run prints; the policies are read from the release's ConfigMap
  (<configuration>-policies in the release namespace) or --policy;
- for a pod that exists, whether its sandbox-webhook.io/status annotation
  matches what the current policies do: created under an older policy hash,
  mutated in the other leak-mitigation mode, or not mutated at all (created
  while the webhook was down under failurePolicy Ignore).

check only reads: get on pods, namespaces, deployments and configmaps, list
on mutatingwebhookconfigurations; check install also get on services and
list on endpointslices.

Exit codes: 0 the pod is (or would be) mutated as the current policies say;
4 it is not, or it has drifted; 1 an error; 2 bad arguments.`,
		Example: `  kubectl-sandbox_webhook check pod rollout-x7k2p -n sandboxes
  kubectl-sandbox_webhook check deployment warm-pool -n agents -o yaml
  kubectl-sandbox_webhook check -f pod.yaml --policy policies/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.filename == "" {
				return command.UsageErrorf("name what to check: check pod NAME, check deployment NAME or check -f FILE")
			}
			return o.run(cmd.Context(), streams, "file", "")
		},
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&o.namespace, "namespace", "n", "", "the namespace (default: the context's)")
	flags.Policy(f, &o.policies, "; default: the release's policies ConfigMap")
	f.StringVar(&o.configuration, "configuration", "", "the MutatingWebhookConfiguration to check (default: every one labelled "+chartNameLabel+")")
	f.StringVar(&o.releaseNamespace, "release-namespace", "", "the release's namespace (default: that of the configuration's service)")
	flags.LeakMitigation(f, &o.leakMitigation, "; default: the release's config ConfigMap, else policy")
	f.StringVarP(&o.output, "output", "o", "text", "text, yaml or json")
	f.StringVar(&o.statusURL, "status-url", "", "the server's /status URL (health port): the leak-mitigation mode and policy set it serves")
	cmd.Flags().StringVarP(&o.filename, "filename", "f", "", "a file holding the pod or workload to check")
	cmd.AddCommand(newCheckInstallCommand(o, streams))
	for _, kind := range []string{"pod", "deployment"} {
		cmd.AddCommand(&cobra.Command{
			Use:   kind + " NAME",
			Short: "Check the " + kind + " NAME",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.run(cmd.Context(), streams, kind, args[0])
			},
		})
	}
	return cmd
}

// checkReport is check's answer; -o yaml|json prints it as is.
type checkReport struct {
	Object    string `json:"object"`
	Namespace string `json:"namespace"`
	// Exists is true for a pod read from the cluster: its annotation is
	// compared with the policies.
	Exists   bool        `json:"exists"`
	Webhooks []Selection `json:"webhooks"`
	// PolicySource says where the policies were read from.
	PolicySource   string         `json:"policySource"`
	LeakMitigation string         `json:"leakMitigation"`
	Policies       []checkPolicy  `json:"policies"`
	PodSkipped     string         `json:"podSkipped,omitempty"`
	Warnings       []string       `json:"warnings,omitempty"`
	Drift          []string       `json:"drift,omitempty"`
	Verdict        string         `json:"verdict"`
	OK             bool           `json:"ok"`
	result         *mutate.Result // for the text report
}

type checkPolicy struct {
	Name      string   `json:"name"`
	Hash      string   `json:"hash"`
	Matched   bool     `json:"matched"`
	MatchedBy string   `json:"matchedBy,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Mode      string   `json:"mode"`
	Injects   []string `json:"injects,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
}

func (o *clusterCheckOptions) run(ctx context.Context, streams command.IOStreams, kind, name string) error {
	var obj input.Object // -f's
	if kind == "file" {
		// A file that holds no single pod is said before any cluster error.
		var err error
		if obj, err = input.ReadOneObject(o.filename); err != nil {
			return err
		}
	}
	ctx, cs, namespace, err := o.start(ctx)
	if err != nil {
		return err
	}

	rep := &checkReport{}
	pod, err := o.readPod(ctx, cs, kind, name, obj, namespace, rep)
	if err != nil {
		return err
	}
	pod.Namespace = cmp.Or(pod.Namespace, namespace)
	rep.Namespace = pod.Namespace
	ns, err := cs.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading namespace %s: %w", pod.Namespace, err)
	}
	configs, err := o.configurations(ctx, cs)
	if err != nil {
		return err
	}
	rep.Webhooks = Select(configs, pod, ns, func(w *admissionregistrationv1.MutatingWebhook) (bool, string, error) {
		return maprun.WebhookMatches(ctx, w.MatchConditions, w.FailurePolicy, pod, ns, "sandbox-webhook-check")
	})

	releaseNS := o.releaseNS(configs)
	set, source, err := o.loadPolicies(ctx, cs, configs, releaseNS)
	if err != nil {
		return err
	}
	rep.PolicySource = source
	var served *serverStatus
	var notes []string // warnings of check's own
	if o.statusURL != "" {
		st, err := readStatus(ctx, o.statusURL)
		if err != nil {
			return fmt.Errorf("reading the server's status %s: %w", o.statusURL, err)
		}
		served = &st
		if st.Policies.Hash != set.Hash {
			notes = append(notes, fmt.Sprintf("the server serves policy set %s, but %s holds %s: this report is for %s", st.Policies.Hash, source, set.Hash, source))
		}
	}
	lm, err := o.leakMode(ctx, cs, configs, releaseNS, served)
	if err != nil {
		return err
	}
	rep.LeakMitigation = string(lm)
	opts := mutate.Options{LeakMitigation: lm}
	if releaseNS != "" {
		opts.ExcludeNamespaces = []string{releaseNS}
	}
	res := mutate.Pod(pod, mutate.Namespace{Name: ns.Name, Labels: ns.Labels}, set, opts)
	res.Warnings = append(notes, res.Warnings...)
	rep.result = &res
	rep.PodSkipped = res.PodSkipped
	rep.Warnings = res.Warnings
	for _, pr := range res.Policies {
		cp := checkPolicy{Name: pr.Policy, Hash: pr.Hash, Matched: pr.Matched, MatchedBy: pr.Reason.MatchedBy(), Reason: pr.Reason.String(), Mode: string(pr.Mode)}
		for _, d := range res.Applied {
			if d.Policy == pr.Policy {
				cp.Injects = append(cp.Injects, d.Item)
			}
		}
		for _, d := range res.Skipped {
			if d.Policy == pr.Policy {
				cp.Skipped = append(cp.Skipped, d.Item+": "+d.Reason)
			}
		}
		rep.Policies = append(rep.Policies, cp)
	}

	failurePolicy, sent := "", false
	for _, s := range rep.Webhooks {
		if s.Sends {
			failurePolicy, sent = s.FailurePolicy, true
		}
	}
	matched := slices.ContainsFunc(res.Policies, func(pr mutate.PolicyResult) bool { return pr.Matched && pr.Enforcement == policy.Enforce })
	if rep.Exists {
		if rep.Drift, err = Drift(pod, res, sent, failurePolicy); err != nil {
			return err
		}
	}
	rep.Verdict, rep.OK = rep.verdict(len(configs) > 0, matched, sent)
	if err := writeCheckReport(streams.Out, rep, o.output); err != nil {
		return err
	}
	if !rep.OK {
		return &command.ExitCodeError{Code: command.ExitCheckFailed, Err: errors.New(rep.Verdict)}
	}
	return nil
}

// verdict says what becomes of the pod, and whether that is what the
// policies ask for.
func (rep *checkReport) verdict(installed, matched, sent bool) (string, bool) {
	switch {
	case !installed:
		return "no sandbox-webhook MutatingWebhookConfiguration is installed: nothing sends pods to the webhook", false
	case rep.PodSkipped != "":
		return "not mutated: " + rep.PodSkipped, !matched
	case matched && !sent && len(rep.Webhooks) > 0 && !slices.ContainsFunc(rep.Webhooks, func(s Selection) bool { return !s.ExcludedByName }):
		return "not mutated: the webhook configuration leaves namespace " + rep.Namespace + " out by name, on purpose", true
	case matched && !sent:
		return "not mutated: the policies select the pod, but no webhook configuration sends it to the webhook (see the fix above)", false
	case !matched && sent:
		return "sent to the webhook, but no enforcing policy selects it: left unchanged", true
	case !matched:
		return "not a pod the policies select, and not sent to the webhook: left unchanged", true
	case len(rep.Drift) > 0:
		return "mutated at creation differently from what the current policies do (drift above)", false
	case rep.Exists:
		return "mutated as the current policies say", true
	default:
		return "will be mutated as the policies above say", true
	}
}

// start checks --output and connects: what every check subcommand does
// first. A nil ctx (a command run outside Execute) is the background one.
func (o *clusterCheckOptions) start(ctx context.Context) (context.Context, kubernetes.Interface, string, error) {
	switch o.output {
	case "text", "yaml", "json":
	default:
		return nil, nil, "", command.UsageErrorf("--output must be text, yaml or json, not %q", o.output)
	}
	if u, err := url.Parse(o.statusURL); o.statusURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return nil, nil, "", command.UsageErrorf("--status-url must be an http:// or https:// URL, such as http://127.0.0.1:8081/status, not %q", o.statusURL)
	}
	cs, namespace, err := o.client()
	return cmp.Or(ctx, context.Background()), cs, namespace, err
}

// client returns a clientset for the kubeconfig context and the namespace
// to use.
func (o *clusterCheckOptions) client() (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig // "": none
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	overrides.Context.Namespace = o.namespace // "": the context's
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, "", err
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, namespace, err
}

// readPod reads the pod to check: kind NAME from the cluster, or the one
// obj, read from -f, holds.
func (o *clusterCheckOptions) readPod(ctx context.Context, cs kubernetes.Interface, kind, name string, obj input.Object, namespace string, rep *checkReport) (*corev1.Pod, error) {
	switch kind {
	case "pod":
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		rep.Object, rep.Exists = "Pod "+namespace+"/"+name, true
		return pod, nil
	case "deployment":
		d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		rep.Object = "Deployment " + namespace + "/" + name
		return &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}, nil
	}
	if !obj.HasPod() {
		return nil, fmt.Errorf("%s: neither a Pod nor a workload with a pod template", o.filename)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(obj.Pod, pod); err != nil {
		return nil, fmt.Errorf("%s: not a valid pod: %w", o.filename, err)
	}
	n := obj.Namespace
	if n != "" && o.namespace != "" && n != o.namespace {
		return nil, command.UsageErrorf("%s is in namespace %q, not --namespace %q", o.filename, n, o.namespace)
	}
	pod.Namespace = cmp.Or(n, pod.Namespace, namespace)
	rep.Object = obj.DisplayName(pod.Namespace)
	return pod, nil
}

// configurations lists the sandbox-webhook webhook configurations.
func (o *clusterCheckOptions) configurations(ctx context.Context, cs kubernetes.Interface) ([]admissionregistrationv1.MutatingWebhookConfiguration, error) {
	api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if o.configuration != "" {
		c, err := api.Get(ctx, o.configuration, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return []admissionregistrationv1.MutatingWebhookConfiguration{*c}, nil
	}
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: chartNameLabel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// releaseNS is --release-namespace, else the namespace of the first
// configuration's first service webhook ("" for url webhooks).
func (o *clusterCheckOptions) releaseNS(configs []admissionregistrationv1.MutatingWebhookConfiguration) string {
	if o.releaseNamespace != "" || len(configs) == 0 {
		return o.releaseNamespace
	}
	for _, w := range configs[0].Webhooks {
		if s := w.ClientConfig.Service; s != nil {
			return s.Namespace
		}
	}
	return ""
}

// loadPolicies reads --policy, or the release's policies ConfigMap.
func (o *clusterCheckOptions) loadPolicies(ctx context.Context, cs kubernetes.Interface, configs []admissionregistrationv1.MutatingWebhookConfiguration, releaseNS string) (*policy.Set, string, error) {
	if len(o.policies) > 0 {
		set, err := policy.Load(o.policies...)
		return set, "--policy " + strings.Join(o.policies, " "), err
	}
	if len(configs) != 1 || releaseNS == "" {
		return nil, "", command.UsageErrorf("cannot tell which release's policies to read (%d configurations; release namespace %q): pass --configuration and --release-namespace, or --policy", len(configs), releaseNS)
	}
	name := configs[0].Name + "-policies"
	cm, err := cs.CoreV1().ConfigMaps(releaseNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("reading the release's policies: %w", err)
	}
	source := "ConfigMap " + releaseNS + "/" + name
	var ps []*policy.Policy
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		p, err := policy.Parse(source+" key "+key, []byte(cm.Data[key]))
		if err != nil {
			return nil, "", err
		}
		ps = append(ps, p...)
	}
	set, err := policy.NewSet(ps)
	return set, source, err
}

// leakMode is --leak-mitigation, else the mode the server serves
// (--status-url), else the release's config ConfigMap, else policy.
func (o *clusterCheckOptions) leakMode(ctx context.Context, cs kubernetes.Interface, configs []admissionregistrationv1.MutatingWebhookConfiguration, releaseNS string, served *serverStatus) (mutate.LeakMitigation, error) {
	if o.leakMitigation != "" {
		return o.leakMitigation, nil
	}
	if served != nil {
		lm, ok := mutate.ParseLeakMitigation(served.LeakMitigation.Mode)
		if !ok {
			return "", fmt.Errorf("%s: leak-mitigation mode %q is not on, off or policy", o.statusURL, served.LeakMitigation.Mode)
		}
		return lm, nil
	}
	if len(configs) != 1 || releaseNS == "" {
		return mutate.LeakMitigationPolicy, nil
	}
	cm, err := cs.CoreV1().ConfigMaps(releaseNS).Get(ctx, configs[0].Name+"-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return mutate.LeakMitigationPolicy, nil
	}
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(cm.Data["leak-mitigation"])
	lm, ok := mutate.ParseLeakMitigation(v)
	if !ok {
		return "", fmt.Errorf("ConfigMap %s/%s: leak-mitigation %q is not on, off or policy", releaseNS, cm.Name, v)
	}
	return lm, nil
}

// writeMachineReport writes a check report as -o json or -o yaml.
func writeMachineReport(w io.Writer, rep any, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	b, err := yaml.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func writeCheckReport(w io.Writer, rep *checkReport, output string) error {
	if output == "json" || output == "yaml" {
		return writeMachineReport(w, rep, output)
	}
	w = textout.NewTextWriter(w) // names, reasons and messages come from the cluster and the files
	// Each item is one line: a drift (from the pod's annotation) or a match
	// condition (CEL over several lines) cannot print a line of its own.
	line := func(format string, args ...any) {
		fmt.Fprintf(w, "%s\n", textout.EscapeControl(fmt.Sprintf(format, args...)))
	}
	line("%s:", rep.Object)
	if len(rep.Webhooks) == 0 {
		line("  webhook: no sandbox-webhook MutatingWebhookConfiguration is installed")
	}
	for _, s := range rep.Webhooks {
		if s.Sends {
			line("  webhook %s/%s: sends the pod (failurePolicy %s)", s.Configuration, s.Webhook, s.FailurePolicy)
		} else {
			line("  webhook %s/%s: does not send the pod: %s", s.Configuration, s.Webhook, s.Reason)
			line("    fix: %s", s.Fix)
		}
		if len(s.MatchConditions) > 0 && s.MatchConditionsNote != "" {
			line("    matchConditions (%s): %s", s.MatchConditionsNote, strings.Join(s.MatchConditions, "; "))
		}
	}
	line("  policies: %s (leak mitigation %s)", rep.PolicySource, rep.LeakMitigation)
	var b strings.Builder
	preview.WriteReport(preview.NewReportWriter(&b), &preview.Pod{Name: rep.Object, Result: *rep.result})
	// preview.WriteReport's first line names the object again.
	_, body, _ := strings.Cut(b.String(), "\n")
	for line := range strings.Lines(body) {
		fmt.Fprintf(w, "  %s", line)
	}
	for _, d := range rep.Drift {
		line("  drift: %s", d)
	}
	line("verdict: %s", rep.Verdict)
	return nil
}
