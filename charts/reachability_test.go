package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestNotesWarnUnreachablePolicies: NOTES warn, naming the policy and the
// block, when an inline policy selects pods by labels the objectSelector
// never sends (the fleet policy under the default app=sandbox selector),
// and stay quiet once the selector sends them.
func TestNotesWarnUnreachablePolicies(t *testing.T) {
	fleet, err := os.ReadFile(filepath.Join("..", "examples", "policies", "fleet", "sandbox-fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inline, err := yaml.Marshal(map[string]any{"policies": map[string]any{"inline": map[string]any{"sandbox-seed.yaml": nil, "sandbox-fleet.yaml": string(fleet)}}})
	if err != nil {
		t.Fatal(err)
	}

	r := mustRender(t, string(inline))
	for _, want := range []string{
		`WARNING: these policies select pods that webhook.objectSelector {"matchLabels":{"app":"sandbox"}}`,
		`  - sandbox-fleet.yaml: policy sandbox-fleet match.any[2].podSelector {"matchExpressions":[{"key":"agents.x-k8s.io/sandbox-name-hash","operator":"Exists"}]}`,
		`  - sandbox-fleet.yaml: policy sandbox-fleet match.any[3].podSelector {"matchLabels":{"app":"openhands-runtime"}}`,
	} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, r.notes)
		}
	}
	if strings.Contains(r.notes, "match.any[0]") {
		t.Errorf("NOTES report match.any[0] (app=sandbox), which the selector sends:\n%s", r.notes)
	}

	// The same policy as a YAML mapping (the schema-checked form) is read alike.
	var fleetMap map[string]any
	if err := yaml.Unmarshal(fleet, &fleetMap); err != nil {
		t.Fatal(err)
	}
	asMap, err := yaml.Marshal(map[string]any{"policies": map[string]any{"inline": map[string]any{"sandbox-seed.yaml": nil, "sandbox-fleet.yaml": fleetMap}}})
	if err != nil {
		t.Fatal(err)
	}
	if m := mustRender(t, string(asMap)); !strings.Contains(m.notes, "match.any[3].podSelector") || strings.Contains(m.notes, "match.any[0]") {
		t.Errorf("a mapping policy: NOTES must report match.any[3] and not match.any[0]:\n%s", m.notes)
	}

	r = mustRender(t, string(inline)+`
webhook:
  objectSelector: {matchLabels: null}
  allowEmptyObjectSelector: true
  namespaceSelector: {matchLabels: {sandbox-webhook.io/enabled: "true"}}
`)
	if strings.Contains(r.notes, "WARNING: these policies") {
		t.Errorf("NOTES warn although the objectSelector sends every pod:\n%s", r.notes)
	}

	r = mustRender(t, string(inline)+`
webhook:
  objectSelector:
    matchLabels: null
    matchExpressions: [{key: agents.x-k8s.io/sandbox-name-hash, operator: Exists}]
`)
	if !strings.Contains(r.notes, "match.any[0].podSelector") || strings.Contains(r.notes, "match.any[2]") {
		t.Errorf("with an agent-sandbox objectSelector, NOTES must report every block but match.any[2]:\n%s", r.notes)
	}
}
