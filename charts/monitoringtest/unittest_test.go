package monitoringtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/timestamp"
	prom "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"sigs.k8s.io/yaml"
)

// unitTestsFile holds the alerts' unit tests, in the format of `promtool test
// rules` (which runs the file as it is). ruleUnitTests runs the part of that
// format the file uses, alert_rule_test over input_series, with Prometheus's
// PromQL engine and alert templates and the pending and firing steps of its
// alerting rules restated in alertState. Running promtool's own code here would
// take Prometheus's rules package, and with it the service discovery and
// remote storage SDKs, into this module; its strict YAML reading refuses the
// parts of the format this does not run.
const unitTestsFile = "testdata/rules_test.yaml"

type unitTestFile struct {
	RuleFiles          []string       `json:"rule_files"`
	EvaluationInterval model.Duration `json:"evaluation_interval"`
	Tests              []testGroup    `json:"tests"`
}

type testGroup struct {
	Name           string          `json:"name"`
	Interval       model.Duration  `json:"interval"`
	InputSeries    []inputSeries   `json:"input_series"`
	AlertRuleTests []alertTestCase `json:"alert_rule_test"`
}

type inputSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `json:"eval_time"`
	Alertname string         `json:"alertname"`
	ExpAlerts []expAlert     `json:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `json:"exp_labels"`
	ExpAnnotations map[string]string `json:"exp_annotations"`
}

// readUnitTests reads the unit test file and the rule files it names.
func readUnitTests(t *testing.T) (unitTestFile, []rulefmt.Rule) {
	t.Helper()
	b, err := os.ReadFile(unitTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f unitTestFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", unitTestsFile, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	var rules []rulefmt.Rule
	for _, name := range f.RuleFiles {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(unitTestsFile), name))
		if err != nil {
			t.Fatal(err)
		}
		var rf rulefmt.RuleGroups
		if err := yaml.UnmarshalStrict(b, &rf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" || r.KeepFiringFor != 0 {
					t.Fatalf("%s: rule %q: only alerting rules without keep_firing_for are run here", name, r.Record+r.Alert)
				}
				rules = append(rules, r)
			}
		}
	}
	if len(rules) == 0 {
		t.Fatalf("%s names no alerting rules", unitTestsFile)
	}
	return f, rules
}

// TestRuleUnitTests runs every test group of the unit test file: it evaluates
// the alerting rules at every evaluation_interval from 0 and compares, at each
// eval_time, the firing alerts of a name with exp_alerts, labels and expanded
// annotations both.
func TestRuleUnitTests(t *testing.T) {
	f, rules := readUnitTests(t)
	for i, tg := range f.Tests {
		name := tg.Name
		if name == "" {
			name = fmt.Sprintf("group %d", i)
		}
		t.Run(name, func(t *testing.T) {
			runTestGroup(t, tg, time.Duration(f.EvaluationInterval), rules)
		})
	}
}

// TestRuleUnitTestsCover checks that the unit tests cover every alert at each of
// its severities, firing and not firing: some eval_time expects the alert with
// that severity, and some eval_time of the same alert expects none with it.
func TestRuleUnitTestsCover(t *testing.T) {
	f, rules := readUnitTests(t)
	type key struct{ alert, severity string }
	fired, quiet := map[key]bool{}, map[key]bool{}
	for _, tg := range f.Tests {
		for _, tc := range tg.AlertRuleTests {
			expected := map[string]bool{}
			for _, a := range tc.ExpAlerts {
				expected[a.ExpLabels["severity"]] = true
				fired[key{tc.Alertname, a.ExpLabels["severity"]}] = true
			}
			for _, r := range rules {
				if r.Alert == tc.Alertname && !expected[r.Labels["severity"]] {
					quiet[key{r.Alert, r.Labels["severity"]}] = true
				}
			}
		}
	}
	for _, r := range rules {
		k := key{r.Alert, r.Labels["severity"]}
		if !fired[k] {
			t.Errorf("%s: no unit test has %s fire with severity %s", unitTestsFile, k.alert, k.severity)
		}
		if !quiet[k] {
			t.Errorf("%s: no unit test has %s not fire with severity %s", unitTestsFile, k.alert, k.severity)
		}
	}
}

func runTestGroup(t *testing.T, tg testGroup, evalInterval time.Duration, rules []rulefmt.Rule) {
	interval := time.Duration(tg.Interval)
	if interval == 0 {
		interval = evalInterval
	}
	db := loadSeries(t, tg.InputSeries, interval)
	engine := prom.NewEngine(prom.EngineOpts{
		MaxSamples:               1e6,
		Timeout:                  time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return evalInterval.Milliseconds() },
		Parser:                   promql,
	})
	query := func(ctx context.Context, qs string, ts time.Time) (prom.Vector, error) {
		q, err := engine.NewInstantQuery(ctx, db, nil, qs, ts)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		res := q.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		switch v := res.Value.(type) {
		case prom.Vector:
			return v, nil
		case prom.Scalar:
			return prom.Vector{{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
		}
		return nil, fmt.Errorf("%q is neither a vector nor a scalar", qs)
	}

	var states []*alertState
	for _, r := range rules {
		states = append(states, &alertState{rule: r, active: map[uint64]*activeAlert{}})
	}
	var end time.Duration
	for _, tc := range tg.AlertRuleTests {
		if tc.Alertname == "" {
			t.Fatalf("an alert_rule_test at eval_time %v has no alertname", tc.EvalTime)
		}
		end = max(end, time.Duration(tc.EvalTime))
	}
	ctx := t.Context()
	for at := time.Duration(0); at <= end; at += evalInterval {
		ts := time.Unix(0, 0).UTC().Add(at)
		for _, s := range states {
			if err := s.eval(ctx, ts, query); err != nil {
				t.Fatalf("rule %s at %v: %v", s.rule.Alert, at, err)
			}
		}
		// As promtool does, an eval_time is checked against the last evaluation
		// at or before it.
		for _, tc := range tg.AlertRuleTests {
			if et := time.Duration(tc.EvalTime); et < at || et >= at+evalInterval {
				continue
			}
			var got []firedAlert
			for _, s := range states {
				if s.rule.Alert == tc.Alertname {
					got = append(got, s.firing(ts)...)
				}
			}
			var want []firedAlert
			for _, a := range tc.ExpAlerts {
				l := labels.NewBuilder(labels.FromMap(a.ExpLabels))
				l.Set(labels.AlertName, tc.Alertname)
				want = append(want, firedAlert{l.Labels(), labels.FromMap(a.ExpAnnotations)})
			}
			sortAlerts(got)
			sortAlerts(want)
			if !slices.EqualFunc(got, want, func(a, b firedAlert) bool {
				return labels.Equal(a.labels, b.labels) && labels.Equal(a.annotations, b.annotations)
			}) {
				t.Errorf("%s at %v:\n  want %v\n  got  %v", tc.Alertname, time.Duration(tc.EvalTime), want, got)
			}
		}
	}
}

// alertState is what Prometheus keeps of an alerting rule between evaluations:
// each series of the result is an alert, pending from the evaluation it first
// appears at and firing once it has been there for the rule's `for`; an alert
// whose series is gone is over, and starts pending again if the series returns.
type alertState struct {
	rule   rulefmt.Rule
	active map[uint64]*activeAlert
}

type activeAlert struct {
	firedAlert
	activeAt time.Time
}

type firedAlert struct {
	labels, annotations labels.Labels
}

func (a firedAlert) String() string { return a.labels.String() + " " + a.annotations.String() }

func sortAlerts(as []firedAlert) {
	slices.SortFunc(as, func(a, b firedAlert) int { return labels.Compare(a.labels, b.labels) })
}

func (s *alertState) eval(ctx context.Context, ts time.Time, query template.QueryFunc) error {
	res, err := query(ctx, s.rule.Expr, ts)
	if err != nil {
		return err
	}
	seen := map[uint64]bool{}
	for _, smpl := range res {
		// The variables Prometheus defines for alert templates.
		data := template.AlertTemplateData(smpl.Metric.Map(), nil, "", smpl)
		const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
		var expandErr error
		expand := func(text string) string {
			out, err := template.NewTemplateExpander(ctx, defs+text, "__alert_"+s.rule.Alert, data,
				model.Time(timestamp.FromTime(ts)), query, nil, nil).Expand()
			if err != nil {
				expandErr = err
			}
			return out
		}
		lb := labels.NewBuilder(smpl.Metric)
		lb.Del(labels.MetricName)
		for k, v := range s.rule.Labels {
			lb.Set(k, expand(v))
		}
		lb.Set(labels.AlertName, s.rule.Alert)
		ann := map[string]string{}
		for k, v := range s.rule.Annotations {
			ann[k] = expand(v)
		}
		if expandErr != nil {
			return expandErr
		}
		a := firedAlert{lb.Labels(), labels.FromMap(ann)}
		h := a.labels.Hash()
		if seen[h] {
			return fmt.Errorf("two alerts with the labels %v", a.labels)
		}
		seen[h] = true
		if old, ok := s.active[h]; ok {
			old.annotations = a.annotations
		} else {
			s.active[h] = &activeAlert{a, ts}
		}
	}
	for h := range s.active {
		if !seen[h] {
			delete(s.active, h)
		}
	}
	return nil
}

func (s *alertState) firing(ts time.Time) []firedAlert {
	var out []firedAlert
	for _, a := range s.active {
		if ts.Sub(a.activeAt) >= time.Duration(s.rule.For) {
			out = append(out, a.firedAlert)
		}
	}
	return out
}

// loadSeries parses input_series as promtool does (a series and its values in
// the expanding notation of promqltest's load command, one every interval from
// 0) into an in-memory storage.Queryable.
func loadSeries(t *testing.T, in []inputSeries, interval time.Duration) memStorage {
	t.Helper()
	var db memStorage
	for _, s := range in {
		lset, vals, err := promql.ParseSeriesDesc(s.Series + " " + s.Values)
		if err != nil {
			t.Fatalf("input series %s %q: %v", s.Series, s.Values, err)
		}
		var samples []chunks.Sample
		for i, v := range vals {
			if v.Omitted {
				continue
			}
			if v.Histogram != nil {
				t.Fatalf("input series %s: histogram samples are not supported here", s.Series)
			}
			samples = append(samples, fSample{t: int64(i) * interval.Milliseconds(), f: v.Value})
		}
		db = append(db, storage.NewListSeries(lset, samples))
	}
	return db
}

type fSample struct {
	t int64
	f float64
}

func (s fSample) T() int64                    { return s.t }
func (fSample) ST() int64                     { return 0 }
func (s fSample) F() float64                  { return s.f }
func (fSample) H() *histogram.Histogram       { return nil }
func (fSample) FH() *histogram.FloatHistogram { return nil }
func (fSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fSample) Copy() chunks.Sample         { return s }

// memStorage is a storage.Queryable over series held in memory.
type memStorage []*storage.SeriesEntry

func (db memStorage) Querier(int64, int64) (storage.Querier, error) { return db, nil }

func (db memStorage) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range db {
		if matchAll(s.Labels(), ms) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &seriesSet{series: out}
}

func matchAll(l labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (memStorage) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (memStorage) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (memStorage) Close() error { return nil }

// seriesSet is a storage.SeriesSet over a slice.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool {
	s.i++
	return s.i <= len(s.series)
}

func (s *seriesSet) At() storage.Series              { return s.series[s.i-1] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }
