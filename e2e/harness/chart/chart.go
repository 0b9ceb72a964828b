// Package chart renders the Helm chart (charts/sandbox-webhook) for the e2e
// suite, the demo and the node e2e, with the chart module's renderer (package
// charts/render, the one its own tests use): the MutatingWebhookConfiguration
// that points the apiserver at a local webhook process, or the whole manifest.
// It is apart from package harness so that what only starts processes (the
// load generator) does not link the Helm SDK.
package chart

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/charts/render"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

// Dir is the chart's directory relative to the repository root.
const Dir = render.Dir

// ConfigOptions are the chart values that point a MutatingWebhookConfiguration
// at a webhook process running outside the cluster.
type ConfigOptions struct {
	// Release is the Helm release name; the configuration is named after it.
	Release string
	// Namespace is the release namespace (the webhook's own, excluded).
	Namespace string
	// URL is webhook.url.
	URL string
	// CABundle is the PEM CA for webhook.caBundle.
	CABundle []byte
	// NamespaceSelector is webhook.namespaceSelector; nil keeps the default.
	NamespaceSelector *metav1.LabelSelector
	// ObjectSelector is webhook.objectSelector; nil keeps the default
	// (app=sandbox), an empty selector sends every pod (and sets
	// webhook.allowEmptyObjectSelector).
	ObjectSelector *metav1.LabelSelector
	// Values are further chart values, merged last.
	Values map[string]any
	// KubeVersion is the cluster version the chart is rendered for;
	// "" is harness.KubeVersion, the newest minor.
	KubeVersion string
}

// RenderWebhookConfiguration renders the chart at root/Dir with the Helm
// SDK, as `helm template` would, and returns its MutatingWebhookConfiguration,
// with webhook.guard off: its entries fail open and are safe only with the
// guard's policy installed too (RenderAdmission). The chart's certificates
// are not used: the process has its own (certificates.mode=existingSecret
// with the given caBundle).
func RenderWebhookConfiguration(ctx context.Context, root string, o ConfigOptions) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	o.Values = MergeValues(map[string]any{"webhook": map[string]any{"guard": map[string]any{"enabled": false}}}, o.Values)
	a, err := RenderAdmission(ctx, root, o)
	if err != nil {
		return nil, err
	}
	if a.Guard != nil {
		return nil, errors.New("webhook.guard is on: its policy must be installed with the configuration (RenderAdmission)")
	}
	return a.Webhooks, nil
}

// Admission is what the chart registers with the API server's admission.
type Admission struct {
	Webhooks *admissionregistrationv1.MutatingWebhookConfiguration
	// Guard and GuardBinding are webhook.guard's, nil when it is off.
	Guard        *admissionregistrationv1.ValidatingAdmissionPolicy
	GuardBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// Unmark and UnmarkBinding are the guard's MutatingAdmissionPolicy
	// that removes a status annotation the pod brings, from Kubernetes
	// 1.36; nil before, or when the guard is off.
	Unmark        *admissionregistrationv1.MutatingAdmissionPolicy
	UnmarkBinding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	// StatusAlways is whether the chart's Deployment runs the server with
	// --status-always (the guard needs it).
	StatusAlways bool
	// Env is the literal environment the chart's Deployment gives the
	// server (GOMEMLIMIT, GOGC), as NAME=value.
	Env []string
}

// RenderAdmission is RenderWebhookConfiguration with the guard's
// ValidatingAdmissionPolicy and binding, when the values turn it on.
func RenderAdmission(ctx context.Context, root string, o ConfigOptions) (*Admission, error) {
	webhook := map[string]any{
		"url":      o.URL,
		"caBundle": base64.StdEncoding.EncodeToString(o.CABundle),
	}
	if o.NamespaceSelector != nil {
		m, err := selectorValue(o.NamespaceSelector)
		if err != nil {
			return nil, err
		}
		webhook["namespaceSelector"] = m
	}
	if o.ObjectSelector != nil {
		m, err := selectorValue(o.ObjectSelector)
		if err != nil {
			return nil, err
		}
		webhook["objectSelector"] = m
		if len(o.ObjectSelector.MatchLabels) == 0 && len(o.ObjectSelector.MatchExpressions) == 0 {
			// The chart refuses an empty selector unless told so.
			webhook["allowEmptyObjectSelector"] = true
		}
	}
	vals := map[string]any{
		"webhook": webhook,
		"certificates": map[string]any{
			"mode":           "existingSecret",
			"existingSecret": map[string]any{"secretName": o.Release + "-local-tls"},
		},
	}
	vals = MergeValues(vals, o.Values)

	manifest, err := RenderManifestFor(ctx, root, o.Release, o.Namespace, o.KubeVersion, vals)
	if err != nil {
		return nil, err
	}
	var a Admission
	var deployment appsv1.Deployment
	var mwcs int
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding the rendered chart: %w", err)
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, err
		}
		var into any
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			mwcs++
			a.Webhooks = &admissionregistrationv1.MutatingWebhookConfiguration{}
			into = a.Webhooks
		case "ValidatingAdmissionPolicy":
			a.Guard = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			into = a.Guard
		case "MutatingAdmissionPolicy":
			a.Unmark = &admissionregistrationv1.MutatingAdmissionPolicy{}
			into = a.Unmark
		case "MutatingAdmissionPolicyBinding":
			a.UnmarkBinding = &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			into = a.UnmarkBinding
		case "ValidatingAdmissionPolicyBinding":
			a.GuardBinding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			into = a.GuardBinding
		case "Deployment":
			into = &deployment
		default:
			continue
		}
		if err := strictUnmarshal(raw, into); err != nil {
			return nil, fmt.Errorf("decoding the chart's %s: %w", tm.Kind, err)
		}
	}
	if mwcs != 1 {
		return nil, fmt.Errorf("the chart rendered %d MutatingWebhookConfigurations, want 1", mwcs)
	}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		a.StatusAlways = a.StatusAlways || slices.Contains(c.Args, "--status-always=true")
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				a.Env = append(a.Env, e.Name+"="+e.Value)
			}
		}
	}
	return &a, nil
}

// RenderManifest renders the chart at root/Dir with the Helm SDK, as
// `helm template` would, for release in namespace with vals (merged over
// values.yaml), and returns the manifest.
func RenderManifest(ctx context.Context, root, release, namespace string, vals map[string]any) (string, error) {
	return RenderManifestFor(ctx, root, release, namespace, "", vals)
}

// RenderManifestFor is RenderManifest for a cluster of kubeVersion ("" is
// harness.KubeVersion).
func RenderManifestFor(ctx context.Context, root, release, namespace, kubeVersion string, vals map[string]any) (string, error) {
	if kubeVersion == "" {
		kubeVersion = harness.KubeVersion
	}
	chrt, err := render.Load(filepath.Join(root, Dir))
	if err != nil {
		return "", err
	}
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	r, err := render.Render(ctx, chrt, render.Options{Release: release, Namespace: namespace, KubeVersion: kv}, vals)
	if err != nil {
		return "", fmt.Errorf("rendering the chart: %w", err)
	}
	return r.Manifest, nil
}

// InstallGuard creates the webhook.guard objects a render holds (the
// ValidatingAdmissionPolicy and its binding, and from Kubernetes 1.36 the
// MutatingAdmissionPolicy that removes a status annotation the pod brings,
// with its binding), and returns what deletes them.
func InstallGuard(ctx context.Context, cs kubernetes.Interface, a *Admission) (remove func(context.Context), err error) {
	api := cs.AdmissionregistrationV1()
	var undo []func(context.Context)
	remove = func(ctx context.Context) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](ctx)
		}
	}
	if a.Guard != nil {
		if _, err := api.ValidatingAdmissionPolicies().Create(ctx, a.Guard, metav1.CreateOptions{}); err != nil {
			return remove, err
		}
		undo = append(undo, func(ctx context.Context) {
			_ = api.ValidatingAdmissionPolicies().Delete(ctx, a.Guard.Name, metav1.DeleteOptions{})
		})
		if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, a.GuardBinding, metav1.CreateOptions{}); err != nil {
			return remove, err
		}
		undo = append(undo, func(ctx context.Context) {
			_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, a.GuardBinding.Name, metav1.DeleteOptions{})
		})
	}
	if a.Unmark != nil {
		if _, err := api.MutatingAdmissionPolicies().Create(ctx, a.Unmark, metav1.CreateOptions{}); err != nil {
			return remove, err
		}
		undo = append(undo, func(ctx context.Context) {
			_ = api.MutatingAdmissionPolicies().Delete(ctx, a.Unmark.Name, metav1.DeleteOptions{})
		})
		if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, a.UnmarkBinding, metav1.CreateOptions{}); err != nil {
			return remove, err
		}
		undo = append(undo, func(ctx context.Context) {
			_ = api.MutatingAdmissionPolicyBindings().Delete(ctx, a.UnmarkBinding.Name, metav1.DeleteOptions{})
		})
	}
	return remove, nil
}

// InstallWebhookConfiguration creates mwc, or replaces the one of that name.
func InstallWebhookConfiguration(ctx context.Context, cs kubernetes.Interface, mwc *admissionregistrationv1.MutatingWebhookConfiguration) error {
	api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err := api.Create(ctx, mwc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := api.Get(ctx, mwc.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		mwc = mwc.DeepCopy()
		mwc.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, mwc, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("installing MutatingWebhookConfiguration %s: %w", mwc.Name, err)
	}
	return nil
}

func selectorValue(s *metav1.LabelSelector) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	// Helm merges maps into the chart's defaults; a null deletes a default
	// key, so an empty selector really selects everything.
	for _, k := range []string{"matchLabels", "matchExpressions"} {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	return m, nil
}

// MergeValues merges src into dst as Helm merges values files (maps key by
// key, anything else replaced) and returns dst.
func MergeValues(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = MergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

func strictUnmarshal(raw []byte, v any) error {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// DashboardFile is the Grafana dashboard the chart ships in a ConfigMap,
// relative to the repository root.
const DashboardFile = Dir + "/dashboards/sandbox-webhook.json"

// Monitoring renders the chart at root with the PrometheusRule and the Grafana
// dashboard on and returns the PrometheusRule's spec as YAML (the format of a
// Prometheus rule file) and the dashboard JSON of its ConfigMap.
func Monitoring(ctx context.Context, root string) (rules, dashboard []byte, err error) {
	manifest, err := RenderManifest(ctx, root, "sw", "sandbox-system", map[string]any{
		"prometheusRule":   map[string]any{"enabled": true},
		"grafanaDashboard": map[string]any{"enabled": true},
	})
	if err != nil {
		return nil, nil, err
	}
	var nrules, ndashboards int
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var obj struct {
			Kind string            `json:"kind"`
			Spec json.RawMessage   `json:"spec"`
			Data map[string]string `json:"data"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("decoding the rendered chart: %w", err)
		}
		switch {
		case obj.Kind == "PrometheusRule":
			nrules++
			if rules, err = yaml.JSONToYAML(obj.Spec); err != nil {
				return nil, nil, err
			}
		case obj.Kind == "ConfigMap" && obj.Data["sandbox-webhook.json"] != "":
			ndashboards++
			dashboard = []byte(obj.Data["sandbox-webhook.json"])
		}
	}
	if nrules != 1 || ndashboards != 1 {
		return nil, nil, fmt.Errorf("the chart rendered %d PrometheusRules and %d dashboard ConfigMaps, want 1 each", nrules, ndashboards)
	}
	return rules, dashboard, nil
}
