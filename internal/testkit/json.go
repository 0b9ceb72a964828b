package testkit

import (
	"encoding/json"
	"testing"
)

// SortedJSON is js read as generic values and written again: its object
// members sorted, as kubectl and sigs.k8s.io/yaml write an object.
func SortedJSON(t testing.TB, js []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
