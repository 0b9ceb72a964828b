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

// Object records a Namespace, and the Namespaces of a List inside a List.
func (c namespaceCollector) Object(pos Position, obj Object) error {
	if obj.IsList() {
		for _, it := range obj.Items() {
			_ = c.Object(pos, Classify(it))
		}
		return nil
	}
	var ns corev1.Namespace
	if obj.Kind == "Namespace" && json.Unmarshal(obj.JSON, &ns) == nil && ns.Name != "" {
		c[ns.Name] = ns.Labels
	}
	return nil
}
func (c namespaceCollector) ListStart(Position, map[string]any) error { return nil }
func (c namespaceCollector) ListItem(pos Position, item Object) error { return c.Object(pos, item) }
func (c namespaceCollector) ListEnd(Position, map[string]any) error   { return nil }
