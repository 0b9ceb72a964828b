package server

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandbox-webhook/sandbox-webhook/internal/admission"
)

// TestDocs keeps docs/serve.md in step with the code: every metric is
// documented and every documented metric exists (internal/command/serve checks
// the flags and the example config file).
func TestDocs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "serve.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	reg := prometheus.NewRegistry()
	m := newServerMetrics(reg)
	m.reloaded(sourcePolicies, nil) // make the label-only gauges appear
	admission.NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, mf := range mfs {
		registered[mf.GetName()] = true
	}
	for _, name := range []string{"sandbox_webhook_policy_hits_total", "sandbox_webhook_shadow_decisions_total",
		"sandbox_webhook_policy_set_info", "sandbox_webhook_leak_mitigation_info", "sandbox_webhook_admission_duration_seconds",
		"sandbox_webhook_pod_level_dropped_total", "sandbox_webhook_image_volume_dropped_total"} {
		registered[name] = true // vectors without samples yet
	}
	documented := map[string]bool{}
	for _, name := range regexp.MustCompile("`(sandbox_webhook_[a-z_]+)`").FindAllStringSubmatch(doc, -1) {
		documented[name[1]] = true
	}
	for _, name := range sorted(registered) {
		if !documented[name] {
			t.Errorf("docs/serve.md does not document metric %s", name)
		}
	}
	for _, name := range sorted(documented) {
		if !registered[name] {
			t.Errorf("docs/serve.md documents metric %s, which does not exist", name)
		}
	}
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
