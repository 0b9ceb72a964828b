// Package monitoringtest checks the chart's PrometheusRule and Grafana dashboard
// with Prometheus's own rule and PromQL parsers, and runs the alerts' unit tests
// (testdata/rules_test.yaml) with its PromQL engine. It is a module of its own so
// that the prometheus module stays out of the webhook's go.mod.
package monitoringtest

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	prom "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// seriesFile lists every metric name the rules and the dashboard query, one a
// line; the e2e suite checks each against a live /metrics.
const seriesFile = "testdata/series.txt"

// rulesFile is the rule file the chart's PrometheusRule renders to and
// dashboardFile the dashboard its ConfigMap carries. The product module's
// e2e/harness/chart test (TestMonitoring) renders the chart and keeps both
// equal to what it renders, so this module needs no Helm SDK.
const (
	rulesFile     = "testdata/rules.yaml"
	dashboardFile = "../sandbox-webhook/dashboards/sandbox-webhook.json"
)

// render returns the rule groups (the PrometheusRule's spec, which is the
// format of a Prometheus rule file) and the dashboard JSON the chart renders.
func render(t *testing.T) (rules []byte, dashboard []byte) {
	t.Helper()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if dashboard, err = os.ReadFile(dashboardFile); err != nil {
		t.Fatal(err)
	}
	return rules, dashboard
}

var promql = parser.NewParser(parser.Options{})

// dashboardExprs returns every PromQL expression of the dashboard: the panels'
// targets and the query variables' label_values(metric, label) metrics.
// Grafana's $__rate_interval is replaced by a duration, as Grafana does before
// it sends a query.
func dashboardExprs(t *testing.T, dashboard []byte) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		args, ok := strings.CutPrefix(v.Definition, "label_values(")
		metric, _, ok2 := strings.Cut(args, ",")
		if !ok || !ok2 {
			t.Errorf("query variable %q: want label_values(metric, label)", v.Definition)
			continue
		}
		exprs = append(exprs, strings.TrimSpace(metric))
	}
	return exprs
}

// metricNames returns the metric names of expr's selectors.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("PromQL %q: %v", expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("PromQL %q: a selector without a metric name", expr)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// TestRulesParse parses the rendered PrometheusRule with Prometheus's rule
// file parser, which also parses each expr and checks labels and templates.
func TestRulesParse(t *testing.T) {
	rules, _ := render(t)
	groups, errs := rulefmt.Parse(rules, false, model.UTF8Validation, promql, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("rule file: %v", err)
	}
	if t.Failed() {
		t.Fatalf("rules:\n%s", rules)
	}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity", r.Alert)
			}
		}
	}
	want := []string{
		"SandboxWebhookAdmissionErrors", "SandboxWebhookLatencyNearTimeout", "SandboxWebhookReloadFailing",
		"SandboxWebhookCertificateExpiring", "SandboxWebhookNoReadyReplica",
		// The node alerts, each at a warning and a critical threshold.
		"SandboxWebhookNodeMemoryCgroupsHigh", "SandboxWebhookNodeMemoryCgroupsHigh",
		"SandboxWebhookNodePercpuMemoryHigh", "SandboxWebhookNodePercpuMemoryHigh",
		// The rest of the notes' health baseline, one threshold each.
		"SandboxWebhookNodeDiskBusy", "SandboxWebhookNodeDiskReadsSlow",
		"SandboxWebhookNodeSandboxCreationSlow", "SandboxWebhookNodePodStartSlow",
	}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts = %v, want %v", alerts, want)
	}
}

// TestRulesRejectBroken makes sure the rule parser as called here does fail
// on a broken expression, so that TestRulesParse can fail.
func TestRulesRejectBroken(t *testing.T) {
	broken := []byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum(rate(x[5m])\n")
	if _, errs := rulefmt.Parse(broken, false, model.UTF8Validation, promql, slog.New(slog.NewTextHandler(io.Discard, nil))); len(errs) == 0 {
		t.Error("rulefmt.Parse accepted an unbalanced expression")
	}
}

// TestSeries parses every query of the rules and the dashboard and checks the
// metric names they select against testdata/series.txt.
func TestSeries(t *testing.T) {
	rules, dashboard := render(t)
	var rf rulefmt.RuleGroups
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	exprs = append(exprs, dashboardExprs(t, dashboard)...)
	var got []string
	for _, e := range exprs {
		got = append(got, metricNames(t, e)...)
	}
	slices.Sort(got)
	got = slices.Compact(got)

	b, err := os.ReadFile(seriesFile)
	if errors.Is(err, os.ErrNotExist) {
		b = nil
	} else if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_SERIES") != "" {
		if err := os.WriteFile(seriesFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := strings.Fields(string(b))
	if !slices.Equal(got, want) {
		t.Errorf("the queries select %v; %s lists %v (UPDATE_SERIES=1 rewrites it; the e2e suite checks each against a live /metrics)", got, seriesFile, want)
	}
}

// TestDashboardThresholds keeps the threshold lines the dashboard draws equal
// to the alerts' default thresholds: a panel whose thresholds are drawn as
// lines shows one metric, and its steps above the base one are the values the
// alerts on that metric compare it with (`expr > threshold`), in order.
func TestDashboardThresholds(t *testing.T) {
	rules, dashboard := render(t)
	var rf rulefmt.RuleGroups
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	engine := prom.NewEngine(prom.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, Parser: promql})
	alertThresholds := map[string][]float64{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			e, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			b, ok := e.(*parser.BinaryExpr)
			if !ok || b.Op != parser.GTR {
				continue
			}
			names := metricNames(t, b.LHS.String())
			if len(names) != 1 || len(metricNames(t, b.RHS.String())) != 0 {
				continue
			}
			q, err := engine.NewInstantQuery(t.Context(), memStorage(nil), nil, b.RHS.String(), time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			res := q.Exec(t.Context())
			s, ok := res.Value.(prom.Scalar)
			if res.Err != nil || !ok {
				t.Fatalf("%s: threshold %s: %v %v", r.Alert, b.RHS, res.Value, res.Err)
			}
			alertThresholds[names[0]] = append(alertThresholds[names[0]], s.V)
		}
	}

	var d struct {
		Panels []struct {
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					Custom struct {
						ThresholdsStyle struct {
							Mode string `json:"mode"`
						} `json:"thresholdsStyle"`
					} `json:"custom"`
					Thresholds struct {
						Steps []struct {
							Value *float64 `json:"value"`
						} `json:"steps"`
					} `json:"thresholds"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, p := range d.Panels {
		def := p.FieldConfig.Defaults
		if def.Custom.ThresholdsStyle.Mode != "line" {
			continue
		}
		lines++
		var names []string
		for _, tg := range p.Targets {
			names = append(names, metricNames(t, strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"))...)
		}
		slices.Sort(names)
		if names = slices.Compact(names); len(names) != 1 {
			t.Errorf("panel %q draws threshold lines over %v; want one metric", p.Title, names)
			continue
		}
		var got []float64
		for _, s := range def.Thresholds.Steps {
			if s.Value != nil {
				got = append(got, *s.Value)
			}
		}
		want := slices.Sorted(slices.Values(alertThresholds[names[0]]))
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("panel %q draws threshold lines at %v; the alerts on %s fire above %v", p.Title, got, names[0], want)
		}
	}
	if lines == 0 {
		t.Error("no panel draws threshold lines")
	}
}
