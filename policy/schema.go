package policy

import (
	"encoding/json"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SchemaID names the published JSON Schema of a SandboxPolicy document.
const SchemaID = "https://raw.githubusercontent.com/sandbox-webhook/sandbox-webhook/main/policy/sandboxpolicy.schema.json"

// The allowed values of the string types with a fixed set: validation and
// the schema read the same lists, so they cannot disagree.
var (
	modes           = []Mode{ModeMemory, ModeDisk}
	enforcements    = []Enforcement{Enforce, Shadow}
	conflictActions = []ConflictAction{Keep, Override}
	levels          = []Level{LevelPod, LevelContainer, LevelAuto}
)

// enums are those lists by type, for the schema.
var enums = map[reflect.Type][]string{
	reflect.TypeFor[Mode]():           enumValues(modes),
	reflect.TypeFor[Enforcement]():    enumValues(enforcements),
	reflect.TypeFor[ConflictAction](): enumValues(conflictActions),
	reflect.TypeFor[Level]():          enumValues(levels),
}

func enumValues[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// JSONSchema returns the JSON Schema (draft-07, what Helm's values.schema.json
// and editors' YAML language servers read) of one SandboxPolicy document,
// generated from the Go types: every field with its JSON name, no other
// field, the fields without omitempty required, the enums' values. Rules it
// cannot express (quantities, globs, host paths, selectors' semantics,
// names owned twice) are left to Load: run `kubectl-sandbox_webhook validate`.
func JSONSchema() map[string]any {
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

// JSONSchemaText is JSONSchema as indented JSON, as the published file holds it.
func JSONSchemaText() []byte {
	b, err := json.MarshalIndent(JSONSchema(), "", "  ")
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
// (metav1.TypeMeta's apiVersion and kind are set by JSONSchema).
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
