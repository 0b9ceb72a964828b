package e2e

import (
	"strconv"
	"strings"
	"testing"
)

// metricSum sums the samples of metric name in a Prometheus text exposition
// whose labels contain every one of labels (each `key="value"`). found is
// false when no sample matched.
func metricSum(text, name string, labels ...string) (sum float64, found bool) {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metric, lbls, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(lbls, l) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// metric reads metric name (summed over the series matching labels) from the
// instance's /metrics.
func (in *instance) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	text, err := in.webhook.Metrics(t.Context())
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	v, _ := metricSum(text, name, labels...)
	return v
}
