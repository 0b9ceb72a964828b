// Package yamldoc splits YAML streams into documents and bounds what a
// document may expand to. Split (and IsSeparator, for dry-run's streaming
// reader) is the one place a stream is cut into documents.
//
// A YAML document may expand far beyond its text. A small
// document of aliases to aliases (a "billion laughs") expands to gigabytes
// when it is converted to JSON or decoded into Go values; dry-run's input
// and the policy loader check the node tree, in which an alias is one node,
// before they convert anything. ReadFile and OpenFile read a file within the
// same bound, and only a regular file: the one way policies and the files the
// command line names are read.
package yamldoc

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// MaxBytes bounds one document (or one item of a streamed List), as read
// and as its aliases expand. The apiserver refuses a request body over
// 3 MiB, so no object it stores comes near it.
const MaxBytes = 8 << 20

// Check returns an error when the document under n, its aliases expanded,
// is larger than MaxBytes (counting each scalar's text and a few bytes per
// node).
func Check(n *yaml.Node) error {
	sizes := map[*yaml.Node]int{}
	if expandedSize(n, sizes) > MaxBytes {
		return fmt.Errorf("YAML aliases expand to more than %d MiB; write the values out, or use fewer aliases", MaxBytes>>20)
	}
	return nil
}

// CheckAliases is Check for a document not yet parsed, before it is
// converted or decoded. Without both an anchor and an alias nothing
// expands, and the document is not parsed for the check.
func CheckAliases(text []byte) error {
	if !bytes.Contains(text, []byte("&")) || !bytes.Contains(text, []byte("*")) {
		return nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(text, &root); err != nil {
		return nil // the conversion proper reports it
	}
	return Check(&root)
}

func expandedSize(n *yaml.Node, sizes map[*yaml.Node]int) int {
	if s, ok := sizes[n]; ok {
		return s
	}
	sizes[n] = 0 // a cycle adds nothing while it is measured
	s := len(n.Value) + 4
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		s = expandedSize(n.Alias, sizes)
	}
	for _, c := range n.Content {
		s += expandedSize(c, sizes)
		if s > MaxBytes {
			break
		}
	}
	sizes[n] = s
	return s
}

// IsSeparator reports whether line is a "---" document separator, perhaps
// followed by a comment: where the policy loader and dry-run's input split a
// stream into documents before they parse any of it.
func IsSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	if !ok {
		return false
	}
	t := bytes.TrimSpace(rest)
	return len(t) == 0 || t[0] == '#' && (rest[0] == ' ' || rest[0] == '\t')
}

// Document is one "---"-separated document of a stream; Line is the number
// of lines before it.
type Document struct {
	Text []byte
	Line int
}

// Split cuts raw at its separator lines (IsSeparator). Every document is
// returned, an empty one included, so that a document's number is its
// place in the stream.
func Split(raw []byte) []Document {
	var (
		docs  []Document
		cur   = Document{Text: []byte{}}
		lines = 0
	)
	for line := range bytes.Lines(raw) {
		lines++
		if IsSeparator(line) {
			docs = append(docs, cur)
			cur = Document{Text: []byte{}, Line: lines}
			continue
		}
		cur.Text = append(cur.Text, line...)
	}
	return append(docs, cur)
}
