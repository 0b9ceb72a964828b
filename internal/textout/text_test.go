package textout

import (
	"bytes"
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, control, lines string }{
		{"plain näme", "plain näme", "plain näme"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"fail\rPASS", `fail\x0dPASS`, `fail\x0dPASS`},
		{"one\n\ttwo", `one\x0a\x09two`, "one\n\ttwo"},
		{"bell\x07 del\x7f c1\u009b", `bell\x07 del\x7f c1\u009b`, `bell\x07 del\x7f c1\u009b`},
		{"rtl\u202egnp.exe \u2066iso\u2069", `rtl\u202egnp.exe \u2066iso\u2069`, `rtl\u202egnp.exe \u2066iso\u2069`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
	} {
		if got := EscapeControl(c.in); got != c.control {
			t.Errorf("EscapeControl(%q) = %q, want %q", c.in, got, c.control)
		}
		if got := EscapeLines(c.in); got != c.lines {
			t.Errorf("EscapeLines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
}

// TestYAMLControlCharacters: strings with the characters YAML does not allow
// as they are, which encoding/json writes as they are, are written and read
// back. (go-yaml writes NEL, which YAML allows, as a line break that reads
// back as a space.)
func TestYAMLControlCharacters(t *testing.T) {
	js, err := json.Marshal(map[string]string{"csi": "a\u009b2J", "del": "b\x7f", "bom": "\ufeffd", "nonchar": "e\uffff"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := YAML(js)
	if err != nil {
		t.Fatal(err)
	}
	back, err := yaml.YAMLToJSON(got)
	if err != nil || !bytes.Equal(back, js) {
		t.Errorf("%s reads back as %s (%v), want %s", got, back, err, js)
	}
}
