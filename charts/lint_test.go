package charts

import (
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"sigs.k8s.io/yaml"
)

// TestHelmLint runs `helm lint --strict` (the SDK's Lint action) over the chart with the
// default values and with each certificate mode: no errors and no warnings.
func TestHelmLint(t *testing.T) {
	for name, values := range map[string]string{
		"defaults":       ``,
		"selfManaged":    `certificates: {mode: selfManaged}`,
		"existingSecret": `{certificates: {mode: existingSecret, existingSecret: {secretName: my-tls}}, webhook: {caBundle: Q0EK}}`,
		"url":            `webhook: {url: "https://127.0.0.1:9443/mutate-v1-pod"}`,
		"everything":     `{serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}, priorityClassName: high, webhook: {matchConditions: [{name: a, expression: "true"}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
				t.Fatal(err)
			}
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = namespace
			lint.KubeVersion = kubeVersion(t)
			result := lint.Run([]string{chartDir}, vals)
			for _, m := range result.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("%s", m)
				} else {
					t.Logf("%s", m)
				}
			}
			for _, err := range result.Errors {
				t.Errorf("lint: %v", err)
			}
			if result.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", result.TotalChartsLinted)
			}
		})
	}
}

// TestHelmLintSeesValues guards the test above: lint checks the given values against the
// schema. (Lint renders `fail` as a log line, not an error; the render tests cover those.)
func TestHelmLintSeesValues(t *testing.T) {
	lint := action.NewLint()
	lint.Namespace = namespace
	lint.KubeVersion = kubeVersion(t)
	result := lint.Run([]string{chartDir}, map[string]any{"replicaCount": "two"})
	if len(result.Errors) == 0 {
		t.Fatal("lint passed with replicaCount=two; want a schema error")
	}
}

// TestHelmLintRefusesInvalidInlinePolicy: helm lint --strict checks an
// inline policy mapping against the SandboxPolicy schema.
func TestHelmLintRefusesInvalidInlinePolicy(t *testing.T) {
	lint := action.NewLint()
	lint.Namespace = namespace
	lint.Strict = true
	lint.KubeVersion = kubeVersion(t)
	bad := map[string]any{
		"apiVersion": "sandbox-webhook.io/v1alpha1",
		"kind":       "SandboxPolicy",
		"metadata":   map[string]any{"name": "bad"},
		"spec": map[string]any{
			"mode":  "tmpfs",
			"match": map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "sandbox"}}},
		},
	}
	result := lint.Run([]string{chartDir}, map[string]any{"policies": map[string]any{"inline": map[string]any{"bad.yaml": bad}}})
	if len(result.Errors) == 0 {
		t.Fatal("helm lint --strict passed an inline policy with mode tmpfs")
	}
	if msg := fmt.Sprint(result.Errors); !strings.Contains(msg, "mode") {
		t.Errorf("lint errors do not name spec.mode: %s", msg)
	}
}
