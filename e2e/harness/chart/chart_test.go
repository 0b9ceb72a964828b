package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// The e2e suite and the demo install the chart's own configuration with
// webhook.url; check that the values they pass land where they must.
func TestRenderWebhookConfiguration(t *testing.T) {
	root, err := harness.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	base := ConfigOptions{
		Release:           "local",
		Namespace:         "local-system",
		URL:               "https://127.0.0.1:9443/mutate-v1-pod",
		CABundle:          ca,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "rl"}},
	}

	t.Run("url mode", func(t *testing.T) {
		mwc, err := RenderWebhookConfiguration(t.Context(), root, base)
		if err != nil {
			t.Fatal(err)
		}
		if len(mwc.Webhooks) != 2 {
			t.Fatalf("%d webhooks, want 2 (pods, ephemeral containers)", len(mwc.Webhooks))
		}
		w := mwc.Webhooks[0]
		if w.ClientConfig.URL == nil || *w.ClientConfig.URL != base.URL || w.ClientConfig.Service != nil {
			t.Errorf("clientConfig %+v, want url %s and no service", w.ClientConfig, base.URL)
		}
		if string(w.ClientConfig.CABundle) != string(ca) {
			t.Errorf("caBundle %q, want %q", w.ClientConfig.CABundle, ca)
		}
		if w.NamespaceSelector.MatchLabels["team"] != "rl" {
			t.Errorf("namespaceSelector %v lost matchLabels team=rl", w.NamespaceSelector)
		}
		excluded := false
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpNotIn &&
				slices.Contains(e.Values, "kube-system") && slices.Contains(e.Values, base.Namespace) {
				excluded = true
			}
		}
		if !excluded {
			t.Errorf("namespaceSelector %v does not exclude kube-system and %s", w.NamespaceSelector, base.Namespace)
		}
		if w.ObjectSelector == nil || w.ObjectSelector.MatchLabels["app"] != "sandbox" {
			t.Errorf("objectSelector %v, want the default app=sandbox", w.ObjectSelector)
		}
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("reinvocationPolicy %v, want IfNeeded", w.ReinvocationPolicy)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("failurePolicy %v, want Fail", w.FailurePolicy)
		}
		if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) ||
			!slices.Equal(w.Rules[0].Resources, []string{"pods"}) {
			t.Errorf("rules %+v, want pods CREATE", w.Rules)
		}
		e := mwc.Webhooks[1]
		if len(e.Rules) != 1 || !slices.Equal(e.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) ||
			!slices.Equal(e.Rules[0].Resources, []string{"pods/ephemeralcontainers"}) {
			t.Errorf("second webhook's rules %+v, want pods/ephemeralcontainers UPDATE", e.Rules)
		}
		if e.ObjectSelector != nil && (len(e.ObjectSelector.MatchLabels) > 0 || len(e.ObjectSelector.MatchExpressions) > 0) {
			t.Errorf("second webhook's objectSelector %v, want none", e.ObjectSelector)
		}
		if e.ClientConfig.URL == nil || *e.ClientConfig.URL != base.URL || e.NamespaceSelector.MatchLabels["team"] != "rl" {
			t.Errorf("second webhook %+v, want the same url and namespaceSelector", e)
		}
	})

	t.Run("the server's environment", func(t *testing.T) {
		a, err := RenderAdmission(t.Context(), root, base)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"GOMEMLIMIT=230MiB", "GOGC=200"}; !slices.Equal(a.Env, want) {
			t.Errorf("Env = %q, want %q: the chart's literal env, POD_NAMESPACE (from the downward API) left out", a.Env, want)
		}
	})

	t.Run("empty objectSelector sends every pod", func(t *testing.T) {
		o := base
		o.ObjectSelector = &metav1.LabelSelector{}
		mwc, err := RenderWebhookConfiguration(t.Context(), root, o)
		if err != nil {
			t.Fatal(err)
		}
		if s := mwc.Webhooks[0].ObjectSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
			t.Errorf("objectSelector %v, want empty", s)
		}
	})
}

// MonitoringRules is what charts/monitoringtest parses with Prometheus's rule
// parser: the rule file the chart's PrometheusRule renders to. It is a golden
// file, not rendered there, so that module needs no Helm SDK.
const MonitoringRules = "charts/monitoringtest/testdata/rules.yaml"

// TestMonitoring keeps charts/monitoringtest's inputs equal to what the chart
// renders: the PrometheusRule's rule groups (a golden file, REFRESH_GOLDEN=true
// rewrites it) and the dashboard ConfigMap, which must carry DashboardFile
// unchanged, the file that module reads.
func TestMonitoring(t *testing.T) {
	root, err := harness.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	rules, dashboard, err := Monitoring(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, MonitoringRules, rules)
	file, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(dashboard), bytes.TrimSpace(file)) {
		t.Errorf("the dashboard ConfigMap does not carry %s unchanged:\n%s", DashboardFile, dashboard)
	}
}
