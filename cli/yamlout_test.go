package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
)

// TestMarshalYAMLEquivalence: marshalYAML, dry-run's fast path, writes
// exactly what sigs.k8s.io/yaml.Marshal writes, for every input and golden
// file of the corpus and for the numbers and strings where JSON and YAML
// disagree most.
func TestMarshalYAMLEquivalence(t *testing.T) {
	var values []any
	for _, pattern := range []string{"testdata/pods/*.yaml", "testdata/golden/*/*.yaml", "testdata/cli/*.yaml", "examples/pods/*.yaml"} {
		files, err := filepath.Glob(golden.Path(pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range bytes.Split(b, []byte("\n---\n")) {
				js, err := yaml.YAMLToJSON(doc)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				var v any
				if err := json.Unmarshal(js, &v); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				values = append(values, v)
			}
		}
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
	for i, v := range values {
		want, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalYAML(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("value %d: marshalYAML differs from yaml.Marshal:\n--- got\n%s\n--- want\n%s", i, got, want)
		}
	}
}
