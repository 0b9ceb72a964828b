// Package textout writes what the commands print: objects as YAML, and text
// with the control characters of its input escaped.
package textout

import (
	"bytes"
	"encoding/json"

	yaml "go.yaml.in/yaml/v2"
)

// YAML writes the JSON value js as YAML, as sigs.k8s.io/yaml.JSONToYAML
// does: keys sorted, block style, numbers as JSON spells them, strings
// quoted where YAML would read them otherwise, with go-yaml's encoder.
// JSONToYAML first reads the JSON with go-yaml's YAML parser, which is slow
// and refuses characters encoding/json writes unescaped (DEL, C1 controls);
// encoding/json reads it here, numbers kept as written (json.Number, which
// go-yaml writes as the number it is).
func YAML(js []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return yaml.Marshal(v)
}
