package e2e

import (
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// metrics returns the instance's /metrics.
func (in *instance) metrics(t *testing.T) []byte {
	t.Helper()
	text, err := in.webhook.Metrics(t.Context())
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	return []byte(text)
}

// metric reads metric name (summed over the series whose labels include
// labels, each key=value) from the instance's /metrics. No such series
// fails the test (testkit.Metric).
func (in *instance) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, err := testkit.Metric(in.metrics(t), name, labels...)
	if err != nil {
		t.Fatalf("the webhook's /metrics: %v", err)
	}
	return v
}
