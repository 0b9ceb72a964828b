package charts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// TestEveryValueCommented checks that every key of values.yaml the chart defines has a
// comment above it (the keys inside Kubernetes objects passed through as they are, and the
// policy file names, are exempt).
func TestEveryValueCommented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	passThrough := []string{
		"resources", "podSecurityContext", "securityContext", "nodeSelector",
		"policies.inline", "webhook.objectSelector",
	}
	var walk func(path string, n *yamlv3.Node)
	walk = func(path string, n *yamlv3.Node) {
		if n.Kind != yamlv3.MappingNode || slices.Contains(passThrough, path) {
			return
		}
		for i := 0; i < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			if strings.TrimSpace(key.HeadComment) == "" {
				t.Errorf("values.yaml:%d: %s has no comment", key.Line, p)
			}
			walk(p, val)
		}
	}
	walk("", doc.Content[0])
}

// TestPackagedFiles checks what `helm package` would ship: only the chart's own files,
// never the tests or golden files beside it.
func TestPackagedFiles(t *testing.T) {
	c := loadChart(t)
	var got []string
	for _, f := range c.Raw {
		got = append(got, f.Name)
	}
	for _, f := range got {
		ok := f == "Chart.yaml" || f == "values.yaml" || f == "values.schema.json" || f == ".helmignore" ||
			f == "dashboards/sandbox-webhook.json" ||
			(strings.HasPrefix(f, "templates/") && (strings.HasSuffix(f, ".yaml") || f == "templates/_helpers.tpl" || f == "templates/NOTES.txt"))
		if !ok {
			t.Errorf("the chart would package %s", f)
		}
	}
	for _, want := range []string{"Chart.yaml", "values.yaml", "values.schema.json", "templates/NOTES.txt", "templates/mutatingwebhookconfiguration.yaml", "dashboards/sandbox-webhook.json"} {
		if !slices.Contains(got, want) {
			t.Errorf("the chart does not package %s (got %v)", want, got)
		}
	}
}
