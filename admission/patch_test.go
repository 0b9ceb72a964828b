package admission

import (
	"encoding/json"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
)

// TestEncodePatch: encodePatch writes what json.Marshal writes, whatever
// the values.
func TestEncodePatch(t *testing.T) {
	ops := []jsonpatch.Operation{
		{Operation: "add", Path: "/metadata/annotations/sandbox-webhook.io~1status", Value: `{"policies":[{"name":"a<b>&c"}]}`},
		{Operation: "add", Path: "/spec/volumes/2", Value: json.RawMessage(`{"name":"uv-cache","emptyDir":{"medium":"Memory","sizeLimit":"1Gi"}}`)},
		{Operation: "add", Path: "/spec/volumes/3", Value: json.RawMessage(`{"name":"x", "y" : [1, 2]}`)},
		{Operation: "add", Path: "/spec/volumes/4", Value: json.RawMessage(`{"name":"a\u003cb","v":"<&>"}`)},
		{Operation: "add", Path: "/spec/volumes/5", Value: json.RawMessage(`"\u2028 \" \\ line"`)},
		{Operation: "replace", Path: "/spec/containers/0/env/1/value", Value: "copy"},
		{Operation: "replace", Path: "/x", Value: nil},
		{Operation: "add", Path: "/y", Value: nil},
		{Operation: "remove", Path: "/spec/volumes/0/emptyDir/medium"},
		{Operation: "remove", Path: "/z", Value: "kept"},
		{Operation: "add", Path: "/spec/resources", Value: map[string]any{"limits": map[string]any{"memory": json.Number("8")}, "b": []any{true, 1.5, "é"}}},
		{Operation: "add", Path: "/metadata/labels/a\"b\\c\u00e9<", Value: "\x01"},
	}
	for i := range len(ops) + 1 {
		got, err := encodePatch(ops[:i])
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(ops[:i])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%d operations:\n got %s\nwant %s", i, got, want)
		}
	}
}
