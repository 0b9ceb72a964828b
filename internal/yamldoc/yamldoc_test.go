package yamldoc

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestCheck(t *testing.T) {
	laughs := func(levels int) string {
		var b strings.Builder
		b.WriteString("a: &a \"" + strings.Repeat("x", 1024) + "\"\n")
		prev := "a"
		for i := range levels {
			name := fmt.Sprintf("l%d", i)
			fmt.Fprintf(&b, "%s: &%s [%s]\n", name, name, strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ","))
			prev = name
		}
		return b.String()
	}
	for _, c := range []struct {
		name string
		doc  string
		ok   bool
	}{
		{"plain", "a: b\nc: [1, 2]\n", true},
		{"a few aliases", laughs(2), true},   // 100 KB expanded
		{"billion laughs", laughs(9), false}, // 10^9 KB expanded
		{"self-reference", "a: &a [*a]\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(c.doc), &n); err != nil {
				t.Fatal(err)
			}
			if err := Check(&n); (err == nil) != c.ok {
				t.Errorf("Check: %v, want ok=%v", err, c.ok)
			}
			if err := CheckAliases([]byte(c.doc)); (err == nil) != c.ok {
				t.Errorf("CheckAliases: %v, want ok=%v", err, c.ok)
			}
		})
	}
}
