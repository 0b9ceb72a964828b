package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// seriesList is the list of the metric names the chart's PrometheusRule and
// Grafana dashboard query, which charts/monitoringtest keeps equal to what
// Prometheus's PromQL parser finds in them.
const seriesList = "charts/monitoringtest/testdata/series.txt"

// externalSeries are the series the rules or the dashboard query that serve
// does not export: kube-state-metrics', node_exporter's and the kubelet's
// (documented in values.yaml).
var externalSeries = []string{
	"kube_deployment_status_replicas_available",
	"kubelet_pod_start_sli_duration_seconds_bucket",
	"kubelet_run_podsandbox_duration_seconds_bucket",
	"kubelet_run_podsandbox_duration_seconds_count",
	"node_cgroups_cgroups",
	"node_disk_io_time_seconds_total",
	"node_disk_read_time_seconds_total",
	"node_disk_reads_completed_total",
	"node_memory_Percpu_bytes",
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promCall     = regexp.MustCompile(`^\s*\(`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// exprMetrics returns the metric names in a PromQL expression: its identifiers
// once strings, label matchers, ranges and grouping label lists are cut out,
// leaving out functions (followed by a parenthesis), keywords and numbers.
func exprMetrics(expr string) []string {
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promRange.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	var names []string
	for _, m := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[m[0]:m[1]]
		if m[0] > 0 && strings.ContainsRune("0123456789.", rune(expr[m[0]-1])) {
			continue // a number's exponent or suffix
		}
		if promCall.MatchString(expr[m[1]:]) || slices.Contains(promKeywords, strings.ToLower(name)) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestExprMetrics(t *testing.T) {
	got := exprMetrics(`histogram_quantile(0.99, sum by (le) (rate(a_bucket{namespace=~"$ns", x="b{c}"}[$__rate_interval])))
  / on (pod) group_left (mode) b:c offset 5m > bool 2.5e3 * time() unless min by (x) (c)`)
	if want := []string{"a_bucket", "b:c", "c"}; !slices.Equal(got, want) {
		t.Errorf("exprMetrics = %v, want %v", got, want)
	}
}

// renderedQueries renders the chart with the PrometheusRule and the Grafana
// dashboard on and returns the PromQL of every alert, dashboard panel and
// dashboard query variable.
func renderedQueries(t *testing.T) []string {
	t.Helper()
	rules, dashboard, err := chart.Monitoring(t.Context(), suite.root)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var rf struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatalf("the PrometheusRule: %v", err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		// label_values(metric, label): the metric is the first argument.
		if args, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			metric, _, _ := strings.Cut(args, ",")
			exprs = append(exprs, metric)
		}
	}
	return exprs
}

// TestMonitoringSeries checks that every series the chart's PrometheusRule and
// Grafana dashboard query is one a real serve exports: it renders the chart
// with both on, takes the metric names out of every query, and looks for each
// among the samples of a live /metrics (sample lines, not # HELP or # TYPE).
// A labelled series has samples only once its labels were used: the
// admission a policy matched creates the latency histogram's and the policy
// hits'; the reload counters are created at start for each source, and a
// rejected reload is driven too so that the scrape is the one an alert for a
// failing reload would see.
func TestMonitoringSeries(t *testing.T) {
	var names []string
	for _, e := range renderedQueries(t) {
		names = append(names, exprMetrics(e)...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	b, err := os.ReadFile(filepath.Join(suite.root, seriesList))
	if err != nil {
		t.Fatal(err)
	}
	// The list is what Prometheus's parser finds (charts/monitoringtest):
	// agreeing with it shows the names read here are all of them.
	if want := strings.Fields(string(b)); !slices.Equal(names, want) {
		t.Fatalf("the queries name %v; %s (from the PromQL parser) lists %v", names, seriesList, want)
	}

	// newInstance waits for a sandbox probe pod to be mutated: an admission
	// that the example policy matched.
	in := newInstance(t, "monitoring", instanceOptions{})
	before := in.metric(t, "sandbox_webhook_policy_reload_errors_total")
	if err := in.policies.Update(map[string][]byte{"broken.yaml": []byte("apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\nmetadata: {name: broken}\nspec: {mode: nonsense}\n")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the webhook to reject the broken policy", time.Minute, func() error {
		if n := in.metric(t, "sandbox_webhook_policy_reload_errors_total"); n <= before {
			return fmt.Errorf("sandbox_webhook_policy_reload_errors_total %v", n)
		}
		return nil
	})

	// The series a scrape stores, not the # HELP and # TYPE lines.
	exposed, err := testkit.SampleNames(in.metrics(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if slices.Contains(externalSeries, n) {
			if exposed[n] {
				t.Errorf("%s is listed as external but serve exports it", n)
			}
			continue
		}
		if !exposed[n] {
			t.Errorf("the chart's monitoring queries %s, which /metrics has no sample of", n)
		}
	}
	for _, n := range externalSeries {
		if !slices.Contains(names, n) {
			t.Errorf("external series %s is no longer queried; drop it from the list", n)
		}
	}
}
