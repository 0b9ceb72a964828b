package admission

import (
	"encoding/json"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
)

// TestEncodePatch: encodePatch writes what json.Marshal writes, whatever the
// values: each operation below takes one branch of encodePatch, appendString
// or plainJSON (a string or raw value holding exactly one character that
// json.Marshal escapes, so that a missed escape shows), alone, and all of them
// together; an empty raw value fails both. (A raw value must be valid JSON:
// encodePatch does not validate what it copies.)
func TestEncodePatch(t *testing.T) {
	cases := []struct {
		name string
		op   jsonpatch.Operation
	}{
		// appendString: a plain string, and one for each character json.Marshal escapes.
		{"plain path", jsonpatch.Operation{Operation: "remove", Path: "/spec/volumes/0/emptyDir/medium"}},
		{"path with <", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a<b"}},
		{"path with >", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a>b"}},
		{"path with &", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a&b"}},
		{`path with "`, jsonpatch.Operation{Operation: "remove", Path: `/metadata/labels/a"b`}},
		{`path with \`, jsonpatch.Operation{Operation: "remove", Path: `/metadata/labels/a\b`}},
		{"path with a control character", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a\x01b"}},
		{"path with a non-ASCII letter", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a\u00e9b"}},
		{"path with U+2028", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a\u2028b"}},
		{"path with invalid UTF-8", jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/a\xffb"}},
		{"operation with <", jsonpatch.Operation{Operation: "a<", Path: "/x"}},
		// The value: written only for add and replace when nil.
		{"replace with nil", jsonpatch.Operation{Operation: "replace", Path: "/x", Value: nil}},
		{"add with nil", jsonpatch.Operation{Operation: "add", Path: "/y", Value: nil}},
		{"remove with nil", jsonpatch.Operation{Operation: "remove", Path: "/z"}},
		{"remove with a value", jsonpatch.Operation{Operation: "remove", Path: "/z", Value: "kept"}},
		// A value that is no json.RawMessage goes through json.Marshal.
		{"string value", jsonpatch.Operation{Operation: "replace", Path: "/spec/containers/0/env/1/value", Value: "copy"}},
		{"string value with <>&", jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations/a", Value: `{"policies":[{"name":"a<b>&c"}]}`}},
		{"map value", jsonpatch.Operation{Operation: "add", Path: "/spec/resources", Value: map[string]any{"limits": map[string]any{"memory": json.Number("8")}, "b": []any{true, 1.5, "é"}}}},
		// plainJSON: copied as it is, or through json.Marshal.
		{"compact raw value", jsonpatch.Operation{Operation: "add", Path: "/spec/volumes/2", Value: json.RawMessage(`{"name":"uv-cache","emptyDir":{"medium":"Memory","sizeLimit":"1Gi"}}`)}},
		{"raw value with a space", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`{"name": "x"}`)}},
		{"raw value with a tab", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage("{\"name\":\t\"x\"}")}},
		{"raw value with a newline", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage("{\"name\":\n\"x\"}")}},
		{"raw value with a carriage return", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage("{\"name\":\r\"x\"}")}},
		{"raw value with spaces in a string", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`{"name":"a b"}`)}},
		{"raw value with <", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`{"name":"a<b"}`)}},
		{"raw value with >", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`{"name":"a>b"}`)}},
		{"raw value with &", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`{"name":"a&b"}`)}},
		{"raw value with U+2028", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage("\"a\u2028b\"")}},
		{"raw value with U+2029", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage("\"a\u2029b\"")}},
		{"raw value with escapes", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`"\u2028 \" \\ \u003c line"`)}},
		{"raw value with an escaped quote before a space", jsonpatch.Operation{Operation: "add", Path: "/v", Value: json.RawMessage(`["a\" ",1]`)}},
	}
	var all []jsonpatch.Operation
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkEncodePatch(t, []jsonpatch.Operation{c.op}) })
		all = append(all, c.op)
	}
	for i := range len(all) + 1 {
		checkEncodePatch(t, all[:i])
	}

	empty := []jsonpatch.Operation{{Operation: "add", Path: "/v", Value: json.RawMessage{}}}
	if _, err := json.Marshal(empty); err == nil {
		t.Fatal("json.Marshal takes an empty raw value")
	}
	if got, err := encodePatch(empty); err == nil {
		t.Errorf("encodePatch of an empty raw value = %s, want an error", got)
	}
}

func checkEncodePatch(t *testing.T, ops []jsonpatch.Operation) {
	t.Helper()
	got, err := encodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%d operations:\n got %s\nwant %s", len(ops), got, want)
	}
}
