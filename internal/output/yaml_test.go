package output

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
)

// TestMarshalYAMLEquivalence: MarshalYAML, dry-run's fast path, writes
// exactly what sigs.k8s.io/yaml.Marshal writes, for every input and golden
// file of the corpus and for the numbers and strings where JSON and YAML
// disagree most.
func TestMarshalYAMLEquivalence(t *testing.T) {
	for i, v := range yamlValues(t) {
		want, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalYAML(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("value %d: MarshalYAML differs from yaml.Marshal:\n--- got\n%s\n--- want\n%s", i, got, want)
		}
	}
}

// corpusDocs returns the YAML documents of the repository's files that
// match patterns.
func corpusDocs(t *testing.T, patterns ...string) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, pattern := range patterns {
		files, err := filepath.Glob(golden.Path(pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, bytes.Split(b, []byte("\n---\n"))...)
		}
	}
	return docs
}

// yamlValues are the corpus's documents, as dry-run decodes them, and values
// where JSON and YAML disagree most.
func yamlValues(t *testing.T) []any {
	t.Helper()
	var values []any
	for _, doc := range corpusDocs(t, "testdata/pods/*.yaml", "testdata/golden/*/*.yaml", "testdata/cli/*.yaml", "examples/pods/*.yaml") {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		values = append(values, v)
	}
	if len(values) < 50 {
		t.Fatalf("only %d documents found", len(values))
	}
	values = append(values, map[string]any{
		"ints":    []any{0.0, math.Copysign(0, -1), 1.0, -1.0, 3600.0, 1234567.0, 1e15, 1e20, 1e21, 1e300, float64(math.MaxInt64), float64(math.MinInt64), 9007199254740993.0},
		"floats":  []any{0.5, 1e-6, 1e-7, 123.456, -2.5e-10},
		"strings": []any{"", "0", "1e3", "true", "null", "~", "0x1F", "010", "- a", "a: b", "#c", " lead", "trail ", "multi\nline\n", "tab\there", "\x1b[2J", "ünï", "0 3 * * *", "'q'", `"d"`, "key with a long value that is certainly longer than eighty columns so that the emitter folds it somewhere"},
		"empty":   map[string]any{},
		"list":    []any{},
		"null":    nil,
		"bools":   []any{true, false},
		"a10":     1.0, "a2": 2.0, "A": 3.0, "_": 4.0,
	})
	return values
}

// TestBlockYAMLEquivalence: BlockYAML writes exactly what MarshalYAML
// writes, as a document and as a List item, or leaves it to MarshalYAML;
// it writes most of the corpus itself.
func TestBlockYAMLEquivalence(t *testing.T) {
	values := yamlValues(t)
	long := strings.Repeat("word ", 30)
	extra := map[string]any{
		"spaced": []any{"sleep infinity", long, long[:70], long[:75], long[:78], long[:80], "a b", " lead", "trail ", "x  y"},
		"keys": map[string]any{"k:{\"name\":\"task\"}": map[string]any{".": map[string]any{}}, "f:metadata": 1.0, "with space": "v",
			"true": "t", "1": "one", "": "empty", strings.Repeat("k", 128): "simple", "é": "accent"},
		"longKey": map[string]any{strings.Repeat("k", 129): "long key"},
		"order": map[string]any{"a10": 1.0, "a2": 2.0, "A": 3.0, "_": 4.0, "a01": 5.0, "a1": 6.0, "a001": 7.0, "B": 8.0, "b": 9.0, "é": 10.0,
			"1": 11.0, "10": 12.0, "9": 13.0, "x-1": 14.0, "x_1": 15.0, "x.1": 16.0, "x1y": 17.0, "x01y": 18.0, "xy": 19.0},
		"status":  `{"policies":[{"name":"sandbox-seed","hash":"7c4a08749658","mode":"memory","injected":["cache/uv-cache","asset/rebench-v2:hostPath"]}]}`,
		"nested":  []any{[]any{"a", "b"}, []any{}, map[string]any{}, nil, true, 1.5, map[string]any{"l": []any{map[string]any{"m": []any{"x"}}}}},
		"words":   []any{"y", "n", "yes", "No", "on", "OFF", "null", "Null", "~", "-", "-a", ".5", ".inf", "1:20", "0o17", "0b1", "1_000", "+1", "2026-11-21", "2026-11-21T10:00:00Z", "8Gi", "500m", "registry.example.com/x:latest", "a:b", "a: b", "a #b", "a#b", "@x", "`x", "%x", "!x", "&x", "*x", "|x", ">x", "?x", "[x", "{x", "x]", "x,y", "---", "...", "\x1b", "\u00e9t\u00e9", "\u2028", "\ufeffbom"},
		"numbers": []any{0.0, math.Copysign(0, -1), 1e21, 1e-7, 12345678901234567890.0, -1.5, math.MaxFloat64},
	}
	// Strings go-yaml folds at the first space past column 80, wherever
	// they start, at every depth, as map values and as items.
	letters := strings.Repeat("a ", 60) + "a"
	deep := map[string]any{"a": extra["status"]}
	seqs := map[string]any{}
	for i := 0; i < 40; i++ {
		deep = map[string]any{"d": deep, "s": long[:60], "l" + strings.Repeat("k", i%7): letters[:50+i]}
		seqs = map[string]any{"s": seqs, "l": []any{letters[:40+i]}}
	}
	values = append(values, extra, deep, seqs, map[string]any{})
	var w BlockYAML
	written := 0
	for i, v := range values {
		doc, ok := v.(map[string]any)
		if !ok {
			continue
		}
		want, err := MarshalYAML(doc)
		if err != nil {
			t.Fatal(err)
		}
		if wrote(w.Document(doc)) {
			written++
			if !bytes.Equal(w.buf, want) {
				t.Errorf("value %d as a document:\n--- got\n%s\n--- want\n%s", i, w.buf, want)
			}
		}
		want, err = MarshalYAML(map[string]any{"items": []any{doc}})
		if err != nil {
			t.Fatal(err)
		}
		w.buf = w.buf[:0]
		if w.sequence([]any{doc}, 0) && !bytes.Equal(w.buf, want[len(ItemsKey):]) {
			t.Errorf("value %d as an item:\n--- got\n%s\n--- want\n%s", i, w.buf, want[len(ItemsKey):])
		}
	}
	if written < len(values)*9/10 || !wrote(w.Document(extra["order"].(map[string]any))) || !wrote(w.Document(deep)) {
		t.Errorf("blockYAML wrote %d of %d documents itself", written, len(values))
	}
	// Each of extra's parts on its own, so one that is left to go-yaml
	// does not hide the others.
	for k, v := range extra {
		doc := map[string]any{k: v}
		want, _ := MarshalYAML(doc)
		if wrote(w.Document(doc)) && !bytes.Equal(w.buf, want) {
			t.Errorf("%s:\n--- got\n%s\n--- want\n%s", k, w.buf, want)
		}
	}
}

// wrote is Document's ok.
func wrote(_ []byte, ok bool) bool { return ok }
