package cli

import (
	"math"
	"strconv"

	yamlv2 "go.yaml.in/yaml/v2"
)

// marshalYAML is sigs.k8s.io/yaml.Marshal for the JSON-shaped values dry-run
// holds (what encoding/json decodes into any), without its round trip
// through JSON: the same go-yaml encoder on the same values, byte for byte
// the same output (TestMarshalYAMLEquivalence), in a third of the time.
// yaml.Marshal writes JSON and parses it back with go-yaml, which turns a
// number without a fraction into an int; yamlValue does the same here.
func marshalYAML(v any) ([]byte, error) {
	return yamlv2.Marshal(yamlValue(v))
}

// yamlValue returns v with every float64 that JSON writes as an integer (no
// fraction, no exponent) as an int64, as go-yaml reads it back. Maps and
// slices are copied, not changed.
func yamlValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = yamlValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = yamlValue(e)
		}
		return out
	case float64:
		// encoding/json writes an integral |f| < 1e21 as its digits,
		// which go-yaml parses as an int64, else as a uint64, else as
		// a float64.
		if t != math.Trunc(t) || math.Abs(t) >= 1e21 {
			return t
		}
		digits := strconv.FormatFloat(t, 'f', -1, 64)
		if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(digits, 10, 64); err == nil {
			return u
		}
		return t
	}
	return v
}
