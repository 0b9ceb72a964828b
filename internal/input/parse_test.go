package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
)

// TestParseYAMLEquivalence: ParseYAML, which converts go-yaml's values
// directly, gives what sigs.k8s.io/yaml.YAMLToJSON and encoding/json give
// (the path it takes for what it does not convert itself), for every
// document of the corpus and for the keys, numbers and strings where YAML
// and JSON disagree most.
func TestParseYAMLEquivalence(t *testing.T) {
	docs := corpusDocs(t, "testdata/pods/*.yaml", "testdata/golden/*/*.yaml", "testdata/cli/*.yaml", "testdata/policies/*.yaml", "examples/pods/*.yaml", "examples/policies/*/*.yaml", "policy/testdata/*.yaml")
	if len(docs) < 100 {
		t.Fatalf("only %d documents found", len(docs))
	}
	for _, s := range []string{
		"a: 1\nb: -1\nc: 0x1F\nd: 010\ne: 1e3\nf: 1.5\ng: .inf\n",
		"h: -.inf\n", "i: .nan\n", "n: ~\nm: null\nk: yes\nl: off\n",
		"big: 9223372036854775807\nbigger: 18446744073709551615\nhuge: 1e400\nodd: 9007199254740993\n",
		"1: int\ntrue: bool\n1.5: float\n0x10: hex\n",
		".inf: a\n", "-.inf: a\n", ".nan: a\n",
		"? [a, b]\n: list key\n", "? {a: b}\n: map key\n", "~: null key\n",
		"s: \"\\xff\\xfeok\"\nt: \"\\u00e9\"\n\"\\xff\": key\n",
		"d: 2001-12-14t21:59:43.10-05:00\n", "d: !!timestamp 2001-12-14\n",
		"b: !!binary aGVsbG8=\n", "f: !!float 1\n", "s: !!str 1\n",
		"a: &x [1, 2]\nb: *x\n", "<<: {a: 1}\nb: 2\n",
		"- 1\n- [a]\n- {b: c}\n", "plain\n", "42\n", "", "# only a comment\n",
		"a: [\n", "a: b: c\n", "\t- tab\n",
	} {
		docs = append(docs, []byte(s))
	}
	for i, doc := range docs {
		got, gotErr := ParseYAML(Position{Source: "t", Doc: i}, doc)
		want, wantErr := parseYAMLViaJSON(doc)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != "t: document "+fmt.Sprint(i)+": "+wantErr.Error() {
			t.Errorf("document %d %q: error %v, want %v", i, doc, gotErr, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("document %d %q: got %#v, want %#v", i, doc, got, want)
		}
	}
}

// parseYAMLViaJSON is the conversion ParseYAML must equal.
func parseYAMLViaJSON(doc []byte) (any, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, nil
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var v any
	err = json.Unmarshal(js, &v)
	return v, err
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
