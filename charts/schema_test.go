package charts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// The SandboxPolicy schema is the last entry of the values schema's
// definitions, between these two lines, so that a refresh rewrites only it.
const (
	sandboxPolicyStart = ",\n    \"sandboxPolicy\": "
	sandboxPolicyEnd   = "\n  },\n  \"properties\": {"
)

// sandboxPolicyDefinition is the published SandboxPolicy schema (which the
// policy package's tests hold to the types) as a definition inside the
// values schema: without $schema and $id.
func sandboxPolicyDefinition(t *testing.T) map[string]any {
	raw, err := os.ReadFile(filepath.Join("..", "policy", "sandboxpolicy.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s["$id"] != policy.SchemaID {
		t.Fatalf("policy/sandboxpolicy.schema.json: $id %v, want %s", s["$id"], policy.SchemaID)
	}
	delete(s, "$schema")
	delete(s, "$id")
	return s
}

// TestValuesSchemaSandboxPolicyInStep: the values schema checks inline
// policies against the schema the policy types generate (REFRESH_GOLDEN=1
// rewrites it).
func TestValuesSchemaSandboxPolicyInStep(t *testing.T) {
	path := filepath.Join("sandbox-webhook", "values.schema.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if refreshGolden() {
		text := string(raw)
		start := strings.Index(text, sandboxPolicyStart)
		end := strings.Index(text, sandboxPolicyEnd)
		if start < 0 || end < start {
			t.Fatalf("%s: no sandboxPolicy definition last in definitions", path)
		}
		def, err := json.MarshalIndent(sandboxPolicyDefinition(t), "    ", "  ")
		if err != nil {
			t.Fatal(err)
		}
		raw = []byte(text[:start+len(sandboxPolicyStart)] + string(def) + text[end:])
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var schema struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(schema.Definitions["sandboxPolicy"], &got); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sandboxPolicyDefinition(t))
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: definitions.sandboxPolicy is not what the policy types generate; run REFRESH_GOLDEN=1 go test . -run TestValuesSchemaSandboxPolicyInStep in charts/", path)
	}
	if !bytes.Contains(raw, []byte(`"$ref": "#/definitions/sandboxPolicy"`)) {
		t.Errorf("%s: nothing refers to definitions.sandboxPolicy", path)
	}
}

// TestInlinePolicyMappings: an inline policy given as a mapping is checked
// by the schema at install time, and a valid one renders into the policies
// ConfigMap as a file the server loads.
func TestInlinePolicyMappings(t *testing.T) {
	const valid = `policies:
  inline:
    sandbox-seed.yaml: null
    structured.yaml:
      apiVersion: sandbox-webhook.io/v1alpha1
      kind: SandboxPolicy
      metadata: {name: structured}
      spec:
        match: {podSelector: {matchLabels: {app: sandbox}}}
        caches: [{name: uv-cache, mountPath: /root/.cache/uv, sizeLimit: 1Gi}]
        env: [{name: UV_LINK_MODE, value: copy}]
`
	data := configMaps(mustRender(t, valid))[fullname+"-policies"].Data
	if _, ok := data["sandbox-seed.yaml"]; ok || len(data) != 1 {
		t.Fatalf("policies ConfigMap keys: %v", data)
	}
	ps, err := policy.Parse("structured.yaml", []byte(data["structured.yaml"]))
	if err != nil || len(ps) != 1 || ps[0].Name() != "structured" || len(ps[0].Spec.Caches) != 1 {
		t.Fatalf("the rendered mapping does not load: %v\n%s", err, data["structured.yaml"])
	}

	for _, tt := range []struct{ name, spec, want string }{
		{"misspelled field", `{match: {podSelector: {matchLabels: {app: sandbox}}}, cachez: []}`, "cachez"},
		{"unknown mode", `{mode: tmpfs, match: {podSelector: {matchLabels: {app: sandbox}}}}`, "mode"},
		{"env without value", `{match: {podSelector: {matchLabels: {app: sandbox}}}, env: [{name: A}]}`, "value"},
		{"missing match", `{mode: disk}`, "match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			values := "policies:\n  inline:\n    bad.yaml:\n      apiVersion: sandbox-webhook.io/v1alpha1\n      kind: SandboxPolicy\n      metadata: {name: bad}\n      spec: " + tt.spec + "\n"
			_, err := renderChart(t, values)
			if err == nil {
				t.Fatal("rendered; want a schema error")
			}
			if msg := err.Error(); !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, tt.want) {
				t.Errorf("want a schema error naming %q: %v", tt.want, err)
			}
		})
	}
}
