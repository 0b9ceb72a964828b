package policy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// schemaFile is the published JSON Schema, generated from the types.
const schemaFile = "sandboxpolicy.schema.json"

// TestJSONSchemaInStep: the published schema is what the types generate
// (REFRESH_GOLDEN=true rewrites it), so a new field shows up there at once.
func TestJSONSchemaInStep(t *testing.T) {
	want := JSONSchemaText()
	if os.Getenv("REFRESH_GOLDEN") != "" {
		if err := os.WriteFile(schemaFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("policy/%s is not what the types generate; run REFRESH_GOLDEN=true go test ./policy/ -run TestJSONSchemaInStep", schemaFile)
	}
}

// TestJSONSchemaFields: every field the decoder knows, at every level, is
// in the schema, and no other.
func TestJSONSchemaFields(t *testing.T) {
	s := JSONSchema()
	for _, path := range []string{"", "spec", "spec.match", "spec.caches[0]", "spec.memory", "spec.assets[0]", "spec.assets[0].hostPath", "spec.env[0]"} {
		node := s
		if path != "" {
			for seg := range strings.SplitSeq(path, ".") {
				name, indexed := strings.CutSuffix(seg, "[0]")
				node = node["properties"].(map[string]any)[name].(map[string]any)
				if indexed {
					node = node["items"].(map[string]any)
				}
			}
		}
		var got []string
		for k := range node["properties"].(map[string]any) {
			got = append(got, k)
		}
		want := fieldsAt(path)
		if !sameStrings(got, want) {
			t.Errorf("%q: schema has %q, the decoder knows %q", path, got, want)
		}
	}
	enum := s["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["mode"].(map[string]any)["enum"]
	if b, _ := json.Marshal(enum); string(b) != `["memory","disk"]` {
		t.Errorf("spec.mode enum %s", b)
	}
}

// TestJSONSchemaDocumentsAreYAML: the schema file is also valid YAML to
// the YAML tools that read it.
func TestJSONSchemaDocumentsAreYAML(t *testing.T) {
	var v map[string]any
	if err := yaml.Unmarshal(JSONSchemaText(), &v); err != nil || v["$id"] != SchemaID {
		t.Errorf("%v %v", err, v["$id"])
	}
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
