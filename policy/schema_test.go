package policy

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// schemaFile is the published JSON Schema, generated from the types.
const schemaFile = "sandboxpolicy.schema.json"

// TestJSONSchemaInStep: the published schema is what the types generate
// (REFRESH_GOLDEN=true rewrites it), so a new field shows up there at once.
func TestJSONSchemaInStep(t *testing.T) {
	want := jsonSchemaText()
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
	s := jsonSchema()
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
	if err := yaml.Unmarshal(jsonSchemaText(), &v); err != nil || v["$id"] != SchemaID {
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

// enums are those lists by type, for the schema.
var enums = map[reflect.Type][]string{
	reflect.TypeFor[Mode]():                      enumValues(modes),
	reflect.TypeFor[Enforcement]():               enumValues(enforcements),
	reflect.TypeFor[ConflictAction]():            enumValues(conflictActions),
	reflect.TypeFor[Level]():                     enumValues(levels),
	reflect.TypeFor[ContainerLimitAction]():      enumValues(limitActions),
	reflect.TypeFor[EnvPosition]():               enumValues(envPositions),
	reflect.TypeFor[corev1.TolerationOperator](): enumValues(operators),
	reflect.TypeFor[corev1.TaintEffect]():        enumValues(taintEffects),
}

func enumValues[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// jsonSchema returns the JSON Schema (draft-07, what Helm's values.schema.json
// and editors' YAML language servers read) of one SandboxPolicy document,
// generated from the Go types: every field with its JSON name, no other
// field, the fields without omitempty required, the enums' values. Rules it
// cannot express (quantities, globs, host paths, selectors' semantics,
// names owned twice) are left to Load: run `kubectl-sandbox_webhook validate`.
func jsonSchema() map[string]any {
	s := schemaOf(reflect.TypeFor[SandboxPolicy]())
	props := s["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"type": "string", "const": APIVersion}
	props["kind"] = map[string]any{"type": "string", "const": Kind}
	s["required"] = append([]any{"apiVersion", "kind"}, s["required"].([]any)...)
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	s["$id"] = SchemaID
	s["title"] = "SandboxPolicy " + APIVersion
	s["description"] = "A sandbox-webhook policy. The schema checks field names, types and enums; `kubectl-sandbox_webhook validate` checks everything."
	return s
}

// jsonSchemaText is jsonSchema as indented JSON, as the published file holds it.
func jsonSchemaText() []byte {
	b, err := json.MarshalIndent(jsonSchema(), "", "  ")
	if err != nil {
		panic(err) // maps of strings, slices and maps only
	}
	return append(b, '\n')
}

func schemaOf(t reflect.Type) map[string]any {
	if values, ok := enums[t]; ok {
		return map[string]any{"type": "string", "enum": toAny(values)}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		required := []any{}
		addFields(t, props, &required)
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": required}
	}
	panic("policy: no JSON Schema for " + t.String())
}

// addFields adds the JSON fields of struct t, inlining embedded structs
// (metav1.TypeMeta's apiVersion and kind are set by jsonSchema).
func addFields(t reflect.Type, props map[string]any, required *[]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Type == reflect.TypeFor[metav1.TypeMeta]():
		case name == "" && f.Anonymous:
			addFields(f.Type, props, required)
		default:
			if name == "" {
				name = f.Name
			}
			props[name] = schemaOf(f.Type)
			if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				*required = append(*required, name)
			}
		}
	}
}

func toAny(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}
