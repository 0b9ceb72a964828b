package gobench

import (
	"bytes"
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/hack/bench/benchdata"
	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
)

// discard is a Visitor that drops what it is handed.
type discard struct{}

func (discard) Object(input.Position, input.Object) error      { return nil }
func (discard) ListStart(input.Position, map[string]any) error { return nil }
func (discard) ListItem(input.Position, input.Object) error    { return nil }
func (discard) ListEnd(input.Position, map[string]any) error   { return nil }

// benchList is a List of n typical pods, as kubectl get -o yaml (or -o
// json) prints it.
func benchList(b *testing.B, n int, asJSON bool) []byte {
	b.Helper()
	items := make([]any, n)
	for i := range items {
		items[i] = benchdata.TypicalPod()
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}}
	out, err := json.Marshal(list)
	if !asJSON && err == nil {
		out, err = yaml.Marshal(list)
	}
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkReadStream reads a List of 100 typical pods item by item, as
// dry-run reads kubectl get's output.
func BenchmarkReadStream(b *testing.B) {
	for _, c := range []struct {
		name   string
		asJSON bool
	}{{"yaml", false}, {"json", true}} {
		in := benchList(b, 100, c.asJSON)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if err := input.ReadStream("bench", bytes.NewReader(in), discard{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
