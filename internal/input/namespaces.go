package input

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// LoadNamespaces reads Namespace objects (a Namespace, a NamespaceList or a
// List, in one or more documents) into name → labels, from a file or the
// files of a directory, as -f takes them.
func LoadNamespaces(path string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if path == "" {
		return out, nil
	}
	files, err := Files([]string{path}, false)
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		if err := ReadFile(name, namespaceCollector(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// namespaceCollector is a visitor that records the labels of every
// Namespace it sees.
type namespaceCollector map[string]map[string]string

func (c namespaceCollector) add(v any) {
	doc, ok := v.(map[string]any)
	if !ok {
		return
	}
	if IsList(doc) {
		for _, it := range doc["items"].([]any) {
			c.add(it)
		}
		return
	}
	if doc["kind"] != "Namespace" {
		return
	}
	b, _ := json.Marshal(doc)
	var ns corev1.Namespace
	if json.Unmarshal(b, &ns) == nil && ns.Name != "" {
		c[ns.Name] = ns.Labels
	}
}

func (c namespaceCollector) Object(_ Position, doc map[string]any) error {
	c.add(doc)
	return nil
}
func (c namespaceCollector) ListStart(Position, map[string]any) error { return nil }
func (c namespaceCollector) ListItem(_ Position, item any) error {
	c.add(item)
	return nil
}
func (c namespaceCollector) ListEnd(Position, map[string]any) error { return nil }
