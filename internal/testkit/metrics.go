package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrNoSeries is what Metric returns when no series matches.
var ErrNoSeries = errors.New("no such series")

// Metric parses exposition, a /metrics page in the Prometheus text format,
// with Prometheus's own parser, and returns the sum of the samples of
// metric name over the series whose labels include labels (each
// key=value, or key="value" as the exposition quotes it). name is a counter's, a gauge's or an untyped metric's, or a
// histogram's or a summary's with _count or _sum.
//
// No matching series is an error that wraps ErrNoSeries, never 0: a metric
// renamed, unregistered or misspelled must not read as a counter that did
// not move. A caller to whom absence means zero (a vector's series appears
// only once counted) says so with errors.Is.
func Metric(exposition []byte, name string, labels ...string) (float64, error) {
	want := map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return 0, fmt.Errorf("label %q is not key=value", l)
		}
		if strings.HasPrefix(v, `"`) {
			var err error
			if v, err = strconv.Unquote(v); err != nil {
				return 0, fmt.Errorf("label %q: %w", l, err)
			}
		}
		want[k] = v
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		return 0, fmt.Errorf("parsing the metrics: %w", err)
	}
	value := func(m *dto.Metric) float64 {
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		default:
			return m.GetUntyped().GetValue()
		}
	}
	family := families[name]
	if family == nil {
		// A histogram's or a summary's _count and _sum are samples of the
		// family without the suffix.
		for suffix, sample := range map[string]func(*dto.Metric) float64{
			"_count": func(m *dto.Metric) float64 {
				if m.Histogram != nil {
					return float64(m.Histogram.GetSampleCount())
				}
				return float64(m.GetSummary().GetSampleCount())
			},
			"_sum": func(m *dto.Metric) float64 {
				if m.Histogram != nil {
					return m.Histogram.GetSampleSum()
				}
				return m.GetSummary().GetSampleSum()
			},
		} {
			base, ok := strings.CutSuffix(name, suffix)
			if f := families[base]; ok && f != nil && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				family, value = f, sample
			}
		}
	}
	var sum float64
	var found bool
	for _, m := range family.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		sum += value(m)
		found = true
	}
	if !found {
		return 0, fmt.Errorf("%s%s: %w", name, labelString(labels), ErrNoSeries)
	}
	return sum, nil
}

// SampleNames returns the names of the samples exposition (a /metrics page
// in the Prometheus text format) holds, as a query names them: a
// histogram's name_bucket, name_sum and name_count, a summary's name,
// name_sum and name_count, any other metric's name.
func SampleNames(exposition []byte) (map[string]bool, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics: %w", err)
	}
	names := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names, nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func labelString(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	return "{" + strings.Join(labels, ",") + "}"
}
