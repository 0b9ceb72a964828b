package mapexport

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/kubeversion"
)

// WriteYAML writes the exported objects as a multi-document YAML stream: a
// header comment that says what they need and what they do not do (the
// differences, and on a partial export every gap), then each policy and its
// binding. The header opens the first object's document rather than being a
// document of its own: kube-apiserver's staticManifestsDir loader refuses a
// document that holds only comments.
func WriteYAML(w io.Writer, exported []Exported, gaps []Gap, sources []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# sandbox-webhook export-map of %s\n", strings.Join(sources, ", "))
	fmt.Fprintf(&b, "# MutatingAdmissionPolicy (admissionregistration.k8s.io/v1) needs Kubernetes 1.%d or later.\n", kubeversion.MutatingAdmissionPolicy)
	b.WriteString("# The pods the apiserver stores are those the webhook gives, field for field; unlike the webhook:\n")
	for _, d := range Differences {
		fmt.Fprintf(&b, "#   - %s\n", d)
	}
	if len(gaps) > 0 {
		b.WriteString("#\n# PARTIAL EXPORT (--allow-gaps). The webhook does the following and these objects do not:\n")
		for _, g := range gaps {
			fmt.Fprintf(&b, "#   - %s\n", g)
		}
	}
	if len(exported) == 0 {
		b.WriteString("#\n# No policy to export.\n")
	}
	objs, err := objectMaps(exported)
	if err != nil {
		return err
	}
	for i, m := range objs {
		out, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the exported objects as a v1 List; a partial export's
// gaps are in each policy's GapsAnnotation.
func WriteJSON(w io.Writer, exported []Exported) error {
	items, err := objectMaps(exported)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// objectMaps returns each policy and its binding as generic JSON data,
// without the empty creationTimestamp a typed object always encodes.
func objectMaps(exported []Exported) ([]map[string]any, error) {
	out := []map[string]any{}
	for _, e := range exported {
		for _, obj := range []any{e.Policy, e.Binding} {
			b, err := json.Marshal(obj)
			if err != nil {
				return nil, err
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, err
			}
			if md, ok := m["metadata"].(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
			out = append(out, m)
		}
	}
	return out, nil
}
