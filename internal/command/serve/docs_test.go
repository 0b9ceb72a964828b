package serve

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestDocs keeps docs/serve.md in step with the command: every flag is
// documented and the example config file is accepted (server's own test
// checks the metrics).
func TestDocs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "serve.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	NewCommand(nil).Flags().VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(doc, "`--"+f.Name+"`") {
			t.Errorf("docs/serve.md does not document --%s", f.Name)
		}
	})

	block := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(doc)
	if block == nil {
		t.Fatal("docs/serve.md has no example config file")
	}
	fs := NewCommand(nil).Flags()
	if err := applyConfig(fs, "docs/serve.md", []byte(block[1])); err != nil {
		t.Errorf("the example config file: %v", err)
	}
	if o, err := flagValuesOf(t, fs).options(fs); err != nil || len(o.PolicyPaths) != 1 {
		t.Errorf("the example config file: %+v %v", o, err)
	}
}
