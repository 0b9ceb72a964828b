package testkit

import (
	"errors"
	"testing"
)

const exposition = `# HELP requests_total Requests.
# TYPE requests_total counter
requests_total{outcome="mutated"} 3
requests_total{outcome="skipped"} 2
# HELP duration_seconds Durations.
# TYPE duration_seconds histogram
duration_seconds_bucket{outcome="mutated",le="0.1"} 2
duration_seconds_bucket{outcome="mutated",le="+Inf"} 3
duration_seconds_sum{outcome="mutated"} 0.25
duration_seconds_count{outcome="mutated"} 3
# HELP up Up.
# TYPE up gauge
up 1
`

func TestMetric(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"requests_total", nil, 5},
		{"requests_total", []string{"outcome=mutated"}, 3},
		{"requests_total", []string{`outcome="mutated"`}, 3},
		{"duration_seconds_count", nil, 3},
		{"duration_seconds_sum", []string{"outcome=mutated"}, 0.25},
		{"up", nil, 1},
	} {
		if got, err := Metric([]byte(exposition), c.name, c.labels...); err != nil || got != c.want {
			t.Errorf("Metric(%s, %q) = %v, %v; want %v", c.name, c.labels, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"requests", nil},
		{"requests_total", []string{"outcome=denied"}},
		{"requests_total", []string{"policy=seed"}},
		{"up_count", nil},
	} {
		if got, err := Metric([]byte(exposition), c.name, c.labels...); !errors.Is(err, ErrNoSeries) {
			t.Errorf("Metric(%s, %q) = %v, %v; want ErrNoSeries", c.name, c.labels, got, err)
		}
	}
	if _, err := Metric([]byte("up{"), "up"); err == nil || errors.Is(err, ErrNoSeries) {
		t.Errorf("a malformed exposition: %v, want a parse error", err)
	}
}

func TestSampleNames(t *testing.T) {
	names, err := SampleNames([]byte(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"requests_total", "duration_seconds_bucket", "duration_seconds_sum", "duration_seconds_count", "up"} {
		if !names[n] {
			t.Errorf("%s missing from %v", n, names)
		}
	}
	if len(names) != 5 {
		t.Errorf("names %v, want 5", names)
	}
}
