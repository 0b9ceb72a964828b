package output

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/benchdata"
)

// BenchmarkEscapeControl escapes what dry-run's report prints for an
// object: clean names, and one with control characters.
func BenchmarkEscapeControl(b *testing.B) {
	for _, s := range []string{"Deployment sandboxes/sandbox-7f9c2d41", "Pod sandboxes/evil\x1b[2J\r\u202e"} {
		b.Run(fmt.Sprintf("%d", len(s)), func(b *testing.B) {
			for b.Loop() {
				_ = EscapeControl(s)
			}
		})
	}
}

// BenchmarkBlockYAML writes a typical pod as a document, as dry-run -o yaml
// writes each object.
func BenchmarkBlockYAML(b *testing.B) {
	raw, err := json.Marshal(benchdata.TypicalPod())
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	var w BlockYAML
	for b.Loop() {
		if _, ok := w.Document(doc); !ok {
			b.Fatal("not written")
		}
	}
}
