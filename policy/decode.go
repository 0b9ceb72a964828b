package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
)

// parse is Parse, returning the valid policies of raw along with the
// problems of the others, and how many policy tests it skipped.
func parse(source string, raw []byte) ([]*Policy, []Problem, int) {
	tests := 0
	type doc struct {
		yamldoc.Document
		node *yaml.Node
		err  error
	}
	var docs []doc
	for _, c := range yamldoc.Split(raw) {
		node, err := parseNode(c.Text)
		switch {
		case err != nil:
			err = offendingLine(c.Text, err)
		case isTest(node):
			tests++
			continue
		case isEmpty(node):
			continue
		default:
			err = yamldoc.Check(node)
		}
		docs = append(docs, doc{c, node, err})
	}

	var (
		policies []*Policy
		problems []Problem
	)
	for i, d := range docs {
		src := source
		if len(docs) > 1 {
			src = fmt.Sprintf("%s#%d", source, i+1)
		}
		if d.err != nil {
			problems = append(problems, Problem{Source: src, Err: yamlError(d.err, d.Line)})
			continue
		}
		name := nodeName(d.node)
		sp, errs, decoded := decode(d.Document, d.node)
		if decoded {
			// Unknown fields aside, the document decoded: its other
			// problems are listed with them, all at once.
			p, cerrs := compile(src, sp)
			if errs = append(errs, withoutEchoes(cerrs, errs)...); len(errs) == 0 {
				policies = append(policies, p)
				continue
			}
		}
		problems = append(problems, problemsOf(src, name, errs)...)
	}
	return policies, problems, tests
}

// parseNode parses one document into a YAML node tree.
func parseNode(text []byte) (*yaml.Node, error) {
	var n yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(text)))
	if err := dec.Decode(&n); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		// A separator yamldoc.Split does not cut at, such as "--- !!map".
		return nil, errors.New("documents must be separated by lines of only ---")
	}
	return &n, nil
}

// isTest reports whether a document is a policy test (kind
// SandboxPolicyTest of this API group): kept beside the policies it tests,
// in a directory or a ConfigMap, it is not one of them.
func isTest(doc *yaml.Node) bool {
	if len(doc.Content) != 1 {
		return false
	}
	v, k := mapValue(doc.Content[0], "apiVersion"), mapValue(doc.Content[0], "kind")
	return v != nil && k != nil && v.Value == APIVersion && k.Value == TestKind
}

// isEmpty reports whether a document holds nothing but comments or null.
func isEmpty(n *yaml.Node) bool {
	return n.Kind == 0 || len(n.Content) == 1 && n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null"
}

// yamlLine finds the line number in a YAML library error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+):`)

// offendingLine corrects the line of the go-yaml v3 errors "did not find
// expected key" and "did not find expected '-' indicator": v3 reports the
// line where the enclosing block starts, often many lines before the
// mistake. go-yaml v2, parsing the same text, reports the line before the
// offending one; that line, plus one, is where the mistake is (a key
// indented other than its siblings, most often).
func offendingLine(text []byte, err error) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reason := strings.TrimPrefix(err.Error(), m[0])
	if reason != " did not find expected key" && reason != " did not find expected '-' indicator" {
		return err
	}
	var v any
	err2 := yamlv2.Unmarshal(text, &v)
	if err2 == nil || !strings.HasSuffix(err2.Error(), reason) {
		return err
	}
	m2 := yamlLine.FindStringSubmatch(err2.Error())
	if m2 == nil {
		return err
	}
	n, _ := strconv.Atoi(m2[1])
	return fmt.Errorf("yaml: line %d:%s (is this line indented as the ones before it?)", n+1, reason)
}

// yamlError reports a YAML syntax error with the line number in the file.
func yamlError(err error, offset int) *field.Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		msg = fmt.Sprintf("line %d:%s", n+offset, msg[len(m[0]):])
	}
	return documentError("invalid YAML: " + strings.TrimPrefix(msg, "yaml: "))
}

// nodeName returns metadata.name of a document, or "".
func nodeName(doc *yaml.Node) string {
	if len(doc.Content) != 1 {
		return ""
	}
	if n := mapValue(mapValue(doc.Content[0], "metadata"), "name"); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

// mapValue returns the value of key in a mapping node, or nil (also when n
// is nil).
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// decode checks apiVersion and kind, then decodes strictly: unknown fields
// and duplicate keys are errors. decoded is true when sp holds the
// document, whatever unknown fields it also had.
func decode(c yamldoc.Document, node *yaml.Node) (sp SandboxPolicy, errs field.ErrorList, decoded bool) {
	if errs := duplicateKeys(node.Content[0], nil, c.Line); len(errs) > 0 {
		return sp, errs, false
	}
	j, err := sigsyaml.YAMLToJSONStrict(c.Text)
	if err != nil {
		return sp, field.ErrorList{yamlError(err, c.Line)}, false
	}
	var top map[string]any
	if err := json.Unmarshal(j, &top); err != nil {
		return sp, field.ErrorList{documentError("must be a mapping with apiVersion, kind, metadata and spec")}, false
	}
	if errs := checkTypeMeta(top["apiVersion"], top["kind"]); len(errs) > 0 {
		return sp, errs, false
	}

	strict, err := sigsjson.UnmarshalStrict(j, &sp)
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		detail := fmt.Sprintf("must be %s, not %s", describe(te.Type), te.Value)
		return sp, field.ErrorList{{Type: field.ErrorTypeInvalid, Field: te.Field, BadValue: field.OmitValueType{}, Detail: detail}}, false
	}
	if err != nil {
		return sp, field.ErrorList{documentError(err.Error())}, false
	}
	for _, e := range strict {
		fe, ok := e.(interface{ FieldPath() string })
		switch {
		case !ok:
			errs = append(errs, documentError(e.Error()))
		case strings.HasPrefix(e.Error(), "duplicate field"):
			errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: fe.FieldPath(), BadValue: field.OmitValueType{}, Detail: "key set twice; set it once"})
		default:
			errs = append(errs, unknownField(fe.FieldPath()))
		}
	}
	return sp, errs, true
}

// withoutEchoes leaves out of errs (which it reuses) those an unknown field
// of unknown causes: at the object that holds it (spec.match is required
// when its one field is misspelled) or at the field it was meant to be.
func withoutEchoes(errs, unknown field.ErrorList) field.ErrorList {
	return slices.DeleteFunc(errs, func(e *field.Error) bool {
		return slices.ContainsFunc(unknown, func(u *field.Error) bool {
			parent, _ := cutLast(u.Field)
			meant := ""
			if _, near, ok := strings.Cut(u.Detail, `did you mean "`); ok {
				meant = parent + "." + strings.TrimSuffix(near, `"?`)
			}
			return e.Field == parent || e.Field == meant || strings.HasPrefix(e.Field, meant+".")
		})
	})
}

// cutLast splits a field path at its last dot.
func cutLast(path string) (parent, key string) {
	i := strings.LastIndex(path, ".")
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// checkTypeMeta checks apiVersion and kind, each of which has exactly one
// allowed value.
func checkTypeMeta(apiVersion, kind any) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		got  any
		want string
	}{{"apiVersion", apiVersion, APIVersion}, {"kind", kind, Kind}} {
		switch fld := field.NewPath(f.name); f.got {
		case f.want:
		case nil, "":
			errs = append(errs, field.Required(fld, fmt.Sprintf("must be %q", f.want)))
		default:
			errs = append(errs, field.NotSupported(fld, f.got, []string{f.want}))
		}
	}
	return errs
}

// duplicateKeys finds keys set twice in one YAML mapping, which JSON
// conversion would otherwise report without a field path. offset is added
// to line numbers.
func duplicateKeys(n *yaml.Node, p *field.Path, offset int) field.ErrorList {
	var errs field.ErrorList
	switch n.Kind {
	case yaml.MappingNode:
		lines := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			kp := p.Child(k.Value) // a root path when p is nil
			if first, dup := lines[k.Value]; dup {
				detail := fmt.Sprintf("key set on lines %d and %d; set it once", first, offset+k.Line)
				errs = append(errs, duplicateError(kp, field.OmitValueType{}, detail))
			} else {
				lines[k.Value] = offset + k.Line
			}
			errs = append(errs, duplicateKeys(n.Content[i+1], kp, offset)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, duplicateKeys(c, p.Index(i), offset)...)
		}
	}
	return errs
}

func duplicateError(p *field.Path, value any, detail string) *field.Error {
	e := field.Duplicate(p, value)
	e.Detail = detail
	return e
}

// unknownField reports a field the policy format does not have, with the
// fields allowed at that place.
func unknownField(path string) *field.Error {
	parent, key := cutLast(path)
	detail := "unknown field"
	names := fieldsAt(parent)
	if near := Nearest(key, names); near != "" {
		detail += fmt.Sprintf("; did you mean %q?", near)
	} else if len(names) > 0 {
		detail += `; supported fields: "` + strings.Join(names, `", "`) + `"`
	}
	return &field.Error{Type: field.ErrorTypeForbidden, Field: path, Detail: detail}
}

// Nearest is the name closest to key, ignoring case, when it is close
// enough to be a misspelling (mountpath, enforcment, cachez): at most two
// edits, and fewer than a third of key's length. "" when none is. Policy
// fields and the command line's names share it for their "did you mean".
func Nearest(key string, names []string) string {
	best, bestDist := "", 0
	for _, n := range names {
		d := editDistance(strings.ToLower(key), strings.ToLower(n))
		if d <= 2 && d*3 < len(key) && (best == "" || d < bestDist) {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fieldsAt returns the JSON field names of the object at path (such as
// "spec.caches[0]") in a SandboxPolicy document.
func fieldsAt(path string) []string {
	t := reflect.TypeFor[SandboxPolicy]()
	if path != "" {
		for seg := range strings.SplitSeq(path, ".") {
			seg, _, _ = strings.Cut(seg, "[")
			names, types := jsonFields(t)
			i := slices.Index(names, seg)
			if i < 0 {
				return nil
			}
			t = types[i]
		}
	}
	names, _ := jsonFields(t)
	return names
}

// jsonFields lists the JSON field names and types of a struct (through
// pointers and slices), inlining embedded structs.
func jsonFields(t reflect.Type) (names []string, types []reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous:
			n, ts := jsonFields(f.Type)
			names, types = append(names, n...), append(types, ts...)
		default:
			if name == "" {
				name = f.Name
			}
			names, types = append(names, name), append(types, f.Type)
		}
	}
	return names, types
}

// describe names a Go type the way a policy author thinks of it.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Slice:
		return "a list"
	default:
		return "a mapping"
	}
}
