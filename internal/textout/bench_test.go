package textout

import (
	"fmt"
	"testing"
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
