package output

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestIndentedJSONEquivalence: IndentedJSON writes exactly what
// json.MarshalIndent writes, at every prefix dry-run uses, and compact
// what json.Marshal writes, for every
// document of the corpus and for the strings, numbers and shapes where
// encoding/json escapes, uses an exponent or writes null; it writes the
// corpus itself, and leaves what it cannot encode to MarshalIndent, errors
// included.
func TestIndentedJSONEquivalence(t *testing.T) {
	values := yamlValues(t)
	values = append(values, map[string]any{
		"escapes": []any{"<b>", "a&b", "x>y", `q"q`, `b\s`, "\u2028", "\u2029", "\x00", "\x07", "\b\f\n\r\t", "\x7f", "ünï", "日本", "\xff", "a\xc3", "\ufeff", "🙂"},
		"numbers": []any{0.0, math.Copysign(0, -1), 1e-6, 9.99e-7, 1e-7, -1e-7, 5e-324, 1e20, 1e21, -1e21, 123456789e15, math.MaxFloat64, -math.MaxFloat64, 0.1, 1.0 / 3, 100.0, -42.0, 1.5e300},
		"keys":    map[string]any{"<k>": 1.0, "a&b": 2.0, "é": 3.0, "": 4.0, "B": 5.0, "a": 6.0, "a10": 7.0, "a2": 8.0, `"`: 9.0, "\n": 10.0},
		"nils":    []any{nil, map[string]any(nil), []any(nil), map[string]any{}, []any{}, []any{[]any{}}, map[string]any{"e": map[string]any{}}},
		"deep":    []any{[]any{[]any{map[string]any{"x": []any{true, false}}}}},
	}, "top-level string", 1.5, nil, []any{1.0, "two"}, map[string]any{"a": []any{}})
	var w IndentedJSON
	for i, v := range values {
		for _, prefix := range []string{"", "  ", "    "} {
			want, err := json.MarshalIndent(v, prefix, "  ")
			if err != nil {
				t.Fatal(err)
			}
			w.buf = w.buf[:0]
			if !w.value(v, prefix, 0) {
				t.Errorf("value %d: IndentedJSON left it to MarshalIndent", i)
				continue
			}
			if !bytes.Equal(w.buf, want) {
				t.Errorf("value %d, prefix %q:\n--- got\n%s\n--- want\n%s", i, prefix, w.buf, want)
			}
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		c := IndentedJSON{compact: true}
		if !c.value(v, "", 0) || !bytes.Equal(c.buf, want) {
			t.Errorf("value %d, compact:\n--- got\n%s\n--- want\n%s", i, c.buf, want)
		}
	}
	// What it does not write itself is MarshalIndent's, errors included.
	for _, v := range []any{
		map[string]any{"n": json.Number("12")},
		map[string]any{"i": 3, "s": []string{"a"}},
		[]any{math.NaN()},
		map[string]any{"inf": math.Inf(1)},
	} {
		want, wantErr := json.MarshalIndent(v, "  ", "  ")
		got, err := w.Marshal(v, "  ")
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%#v: got %q, %v; want %q, %v", v, got, err, want, wantErr)
		}
		want, wantErr = json.Marshal(v)
		got, err = CompactJSON(v)
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%#v compact: got %q, %v; want %q, %v", v, got, err, want, wantErr)
		}
	}
	if got, _ := w.Marshal(map[string]any{"a": strings.Repeat("x", 3)}, ""); string(got) != "{\n  \"a\": \"xxx\"\n}" {
		t.Errorf("got %q", got)
	}
}
