// Package input reads what -f names, as kubectl does: files, directories
// and stdin of YAML or JSON documents and Lists, streamed one object (and
// one List item) at a time, each converted to JSON (YAML with
// sigs.k8s.io/yaml); and classifies each object (a Pod, a workload with a
// pod template, anything else) for the commands that mutate them.
package input

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
)

// MaxObjectBytes bounds one input object: a YAML or JSON document, or one
// item of a List, which is read item by item.
const MaxObjectBytes = yamldoc.MaxBytes

// The input is read one document, and in a List one item, at a time:
// memory is bounded by the largest object, not by the input. A visitor sees
// the objects in input order.
type Visitor interface {
	// Object is one document that is not a List.
	Object(pos Position, obj Object) error
	// ListStart opens a List document; head holds the keys read before
	// its items.
	ListStart(pos Position, head map[string]any) error
	// ListItem is one item of the open List: an object, or another JSON
	// value (item.IsObject says which).
	ListItem(pos Position, item Object) error
	// ListEnd closes the List; tail holds the keys read after its items.
	ListEnd(pos Position, tail map[string]any) error
}

// Position names where an object is in the input, for messages.
type Position struct {
	Source string // file name, or "stdin"
	Doc    int    // 1-based document number
	Item   int    // 1-based item number in a List, 0 for the document
}

func (p Position) String() string {
	s := fmt.Sprintf("%s: document %d", p.Source, p.Doc)
	if p.Item > 0 {
		s += fmt.Sprintf(", item %d", p.Item)
	}
	return s
}

// ErrStdinTwice is Files' error for "-" given twice: a usage error.
var ErrStdinTwice = errors.New("-f -: stdin can be read only once")

// Files expands -f arguments as kubectl does: "-" is stdin (once), a
// directory holds its *.json, *.yaml and *.yml files (and with recursive
// those of its subdirectories), in lexical order; a file named directly is
// read whatever its extension.
func Files(names []string, recursive bool) ([]string, error) {
	var out []string
	stdin := false
	for _, name := range names {
		if name == "-" {
			if stdin {
				return nil, ErrStdinTwice
			}
			stdin = true
			out = append(out, name)
			continue
		}
		st, err := os.Stat(name)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, name)
			continue
		}
		// A symlinked file in the directory is read where it leads, inside
		// the directory or not, as kubectl reads it (a symlinked
		// subdirectory is not descended into, as WalkDir does not). Unlike
		// the paths in a policy test file, which test keeps inside the
		// repository, -f names what the person running the command chose
		// to read; dry-run prints what it reads as kubectl apply
		// --dry-run=client -o yaml -f would.
		err = filepath.WalkDir(name, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != name && !recursive {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(path) {
			case ".json", ".yaml", ".yml":
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReadStream reads one input stream and hands its objects to v. As kubectl
// does, a stream whose first non-space byte is '{' is JSON (one or more
// concatenated values), any other YAML ("---"-separated documents).
func ReadStream(source string, r io.Reader, v Visitor) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		b, err := br.Peek(1)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", source, err)
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
			continue
		case '{':
			return readJSON(source, br, v)
		}
		return (&yamlReader{source: source, lines: lineReader{r: br}, v: v}).run()
	}
}

// ReadFile reads the file name with ReadStream. It must be a regular file
// (yamldoc.OpenFile): a device or a FIFO is refused, not read.
func ReadFile(name string, v Visitor) error {
	f, err := yamldoc.OpenFile(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return ReadStream(name, f, v)
}

// errTooLarge says that one object exceeds MaxObjectBytes.
func errTooLarge(pos Position) error {
	return fmt.Errorf("%s: larger than %d MiB: an object the apiserver could store is far smaller (split a List's items across documents or files if they are genuinely this large)", pos, MaxObjectBytes>>20)
}

// lineReader returns the lines of a stream one at a time, and can push one
// back.
type lineReader struct {
	r    *bufio.Reader
	long []byte
	back []byte // a line pushed back; a line is never empty
}

// next returns the next line with its "\n" (the last may lack it), valid
// until the following call; io.EOF at the end. A line longer than limit is
// errLineTooLong.
func (l *lineReader) next(limit int) ([]byte, error) {
	if line := l.back; len(line) > 0 {
		l.back = l.back[:0]
		return line, nil
	}
	line, err := l.r.ReadSlice('\n')
	if err == nil || (errors.Is(err, io.EOF) && len(line) > 0) {
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	l.long = append(l.long[:0], line...)
	for {
		line, err = l.r.ReadSlice('\n')
		l.long = append(l.long, line...)
		if len(l.long) > limit {
			return nil, errLineTooLong
		}
		switch {
		case err == nil, errors.Is(err, io.EOF):
			return l.long, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

func (l *lineReader) pushBack(line []byte) {
	l.back = append(l.back[:0], line...)
}

var errLineTooLong = errors.New("line too long")

// yamlReader splits a YAML stream into documents and streams the items of a
// List written in block style (an "items:" key at the start of a line,
// followed by "- " entries, as kubectl get -o yaml prints it). Each item is
// parsed on its own, with the columns it has in the document, so it reads
// exactly as it does inside the List.
type yamlReader struct {
	source string
	lines  lineReader
	v      Visitor
	doc    int
}

func (y *yamlReader) run() error {
	for {
		y.doc++
		more, err := y.document()
		if err != nil || !more {
			return err
		}
	}
}

// blankOrComment reports whether line holds no YAML content.
func blankOrComment(line []byte) bool {
	t := bytes.TrimSpace(line)
	return len(t) == 0 || t[0] == '#'
}

// indent returns the number of leading spaces of line.
func indent(line []byte) int {
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	return n
}

// isItemsKey reports whether line is a top-level "items:" key with nothing
// after it but a comment.
func isItemsKey(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("items:"))
	return ok && blankOrComment(rest)
}

// namesOtherKind reports whether the top-level text before "items:" names a
// kind that is not a List: such an object's items are not streamed, and it
// passes through whole, as any object that is not a pod does.
func namesOtherKind(head []byte) bool {
	for line := range bytes.Lines(head) {
		if rest, ok := bytes.CutPrefix(line, []byte("kind:")); ok {
			kind := strings.Trim(strings.TrimSpace(string(rest)), `"'`)
			return !strings.HasSuffix(kind, "List")
		}
	}
	return false
}

// isEntry reports whether line starts a block sequence entry at column col.
func isEntry(line []byte, col int) bool {
	if indent(line) != col || len(line) <= col || line[col] != '-' {
		return false
	}
	return len(line) == col+1 || line[col+1] == ' ' || line[col+1] == '\n' || line[col+1] == '\r'
}

// document reads one document; more is false at the end of the stream.
func (y *yamlReader) document() (more bool, err error) {
	pos := Position{Source: y.source, Doc: y.doc}
	var buf []byte
	for {
		line, err := y.lines.next(MaxObjectBytes)
		switch {
		case errors.Is(err, io.EOF):
			return false, y.whole(pos, buf)
		case errors.Is(err, errLineTooLong):
			return false, errTooLarge(pos)
		case err != nil:
			return false, fmt.Errorf("%s: %w", pos, err)
		}
		if yamldoc.IsSeparator(line) {
			return true, y.whole(pos, buf)
		}
		if isItemsKey(line) && !namesOtherKind(buf) {
			col, ok, err := y.entryColumn(&buf, line, pos)
			if err != nil {
				return false, err
			}
			if ok {
				return y.list(pos, buf, col)
			}
			continue
		}
		if len(buf)+len(line) > MaxObjectBytes {
			return false, errTooLarge(pos)
		}
		buf = append(buf, line...)
	}
}

// entryColumn looks past an "items:" line for the first sequence entry. When
// there is one it returns its column; otherwise the lines read are appended
// to buf, the next one is pushed back, and ok is false.
func (y *yamlReader) entryColumn(buf *[]byte, itemsLine []byte, pos Position) (col int, ok bool, err error) {
	*buf = append(*buf, itemsLine...)
	mark := len(*buf)
	for {
		line, err := y.lines.next(MaxObjectBytes)
		switch {
		case errors.Is(err, io.EOF):
			return 0, false, nil
		case errors.Is(err, errLineTooLong):
			return 0, false, errTooLarge(pos)
		case err != nil:
			return 0, false, fmt.Errorf("%s: %w", pos, err)
		}
		if !yamldoc.IsSeparator(line) && blankOrComment(line) {
			*buf = append(*buf, line...)
			continue
		}
		if c := indent(line); !yamldoc.IsSeparator(line) && isEntry(line, c) {
			*buf = (*buf)[:mark-len(itemsLine)]
			y.lines.pushBack(line)
			return c, true, nil
		}
		y.lines.pushBack(line)
		return 0, false, nil
	}
}

// list streams the items of a List whose entries start at column col; head
// is the text before "items:".
func (y *yamlReader) list(pos Position, head []byte, col int) (more bool, err error) {
	headDoc, err := parseYAMLObject(pos, head)
	if err != nil {
		return false, err
	}
	if err := y.v.ListStart(pos, headDoc); err != nil {
		return false, err
	}
	var item []byte
	n := 0
	flush := func() error {
		if item == nil {
			return nil
		}
		n++
		ipos := pos
		ipos.Item = n
		js, err := toJSON(ipos, item)
		if err != nil {
			return err
		}
		item = item[:0]
		return y.v.ListItem(ipos, Classify(js))
	}
	var tail []byte
	inTail := false
	for {
		line, err := y.lines.next(MaxObjectBytes)
		eof := errors.Is(err, io.EOF)
		switch {
		case eof:
		case errors.Is(err, errLineTooLong):
			if !inTail {
				pos.Item = n + 1
			}
			return false, errTooLarge(pos)
		case err != nil:
			return false, fmt.Errorf("%s: %w", pos, err)
		}
		if eof || yamldoc.IsSeparator(line) {
			if !inTail {
				if err := flush(); err != nil {
					return false, err
				}
			}
			tailDoc, err := parseYAMLObject(pos, tail)
			if err != nil {
				return false, err
			}
			return !eof, y.v.ListEnd(pos, tailDoc)
		}
		switch {
		case inTail:
			if len(tail)+len(line) > MaxObjectBytes {
				return false, errTooLarge(pos)
			}
			tail = append(tail, line...)
		case isEntry(line, col):
			if err := flush(); err != nil {
				return false, err
			}
			// The entry's dash becomes a space: the item keeps its
			// columns, and so reads as it does inside the sequence.
			item = append(item, line...)
			item[col] = ' '
		case blankOrComment(line) || indent(line) > col:
			if item == nil {
				continue
			}
			if len(item)+len(line) > MaxObjectBytes {
				p := pos
				p.Item = n + 1
				return false, errTooLarge(p)
			}
			item = append(item, line...)
		default:
			if err := flush(); err != nil {
				return false, err
			}
			inTail = true
			tail = append(tail, line...)
		}
	}
}

// whole parses a document that is not streamed item by item and hands it to
// the visitor: a List's items one by one, any other object as one.
func (y *yamlReader) whole(pos Position, text []byte) error {
	js, err := toJSON(pos, text)
	if err != nil {
		return err
	}
	if string(js) == "null" {
		return nil // empty, or only comments
	}
	obj := Classify(js)
	if !obj.IsObject() {
		return fmt.Errorf("%s is not an object", pos)
	}
	return visitDocument(pos, obj, y.v)
}

// visitDocument hands a whole document to v.
func visitDocument(pos Position, obj Object, v Visitor) error {
	if !obj.IsList() {
		return v.Object(pos, obj)
	}
	head := make(map[string]any, len(obj.fields))
	for k, raw := range obj.fields {
		if k != "items" {
			var val any
			if err := json.Unmarshal(raw, &val); err != nil {
				return fmt.Errorf("%s: %w", pos, err)
			}
			head[k] = val
		}
	}
	if err := v.ListStart(pos, head); err != nil {
		return err
	}
	for i, it := range obj.Items() {
		ipos := pos
		ipos.Item = i + 1
		if err := v.ListItem(ipos, Classify(it)); err != nil {
			return err
		}
	}
	return v.ListEnd(pos, map[string]any{})
}

// toJSON converts one YAML document, or List item, to JSON with
// sigs.k8s.io/yaml, once what its aliases expand to is bounded. Nothing, or
// only comments, is null.
func toJSON(pos Position, text []byte) ([]byte, error) {
	if err := yamldoc.CheckAliases(text); err != nil {
		return nil, fmt.Errorf("%s: %w", pos, err)
	}
	js, err := yaml.YAMLToJSON(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pos, err)
	}
	return js, nil
}

// parseYAMLObject parses the text around a List's items: an object, or
// nothing (an empty object).
func parseYAMLObject(pos Position, text []byte) (map[string]any, error) {
	js, err := toJSON(pos, text)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if string(js) == "null" {
		return m, nil
	}
	if js[0] != '{' {
		return nil, fmt.Errorf("%s is not an object", pos)
	}
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", pos, err)
	}
	return m, nil
}

// countingReader counts the bytes read through it and fails a read once
// more than MaxObjectBytes were read since mark: the JSON decoder buffers a
// whole value, so this bounds the memory one value can take.
type countingReader struct {
	r    io.Reader
	n    int64
	mark int64
	pos  Position
	err  error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n-c.mark > MaxObjectBytes {
		c.err = errTooLarge(c.pos)
		return n, c.err
	}
	return n, err
}

// jsonReader reads a stream of JSON values, and the items of a List value
// one at a time.
type jsonReader struct {
	cr  *countingReader
	dec *json.Decoder
	v   Visitor
}

func readJSON(source string, r io.Reader, v Visitor) error {
	cr := &countingReader{r: r}
	j := &jsonReader{cr: cr, dec: json.NewDecoder(cr), v: v}
	for doc := 1; ; doc++ {
		more, err := j.document(Position{Source: source, Doc: doc})
		if err != nil || !more {
			return err
		}
	}
}

// start begins a new object for the size bound.
func (j *jsonReader) start(pos Position) {
	j.cr.mark, j.cr.pos, j.cr.err = j.cr.n, pos, nil
}

// wrap names pos in err, or returns the size bound's error.
func (j *jsonReader) wrap(pos Position, err error) error {
	if j.cr.err != nil {
		return j.cr.err
	}
	return fmt.Errorf("%s: %w", pos, err)
}

func (j *jsonReader) token(pos Position) (json.Token, error) {
	tok, err := j.dec.Token()
	if err != nil {
		return nil, j.wrap(pos, err)
	}
	return tok, nil
}

// value decodes the next value whole.
func (j *jsonReader) value(pos Position) (any, error) {
	var v any
	if err := j.dec.Decode(&v); err != nil || j.cr.err != nil {
		return nil, j.wrap(pos, err)
	}
	return v, nil
}

// rest decodes the rest of a value whose first token, not the "[" of a
// List's items, is tok.
func (j *jsonReader) rest(pos Position, tok json.Token) (any, error) {
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if d != '{' {
		return nil, fmt.Errorf("%s: unexpected %v", pos, d)
	}
	m := map[string]any{}
	for j.dec.More() {
		k, err := j.token(pos)
		if err != nil {
			return nil, err
		}
		v, err := j.value(pos)
		if err != nil {
			return nil, err
		}
		m[k.(string)] = v
	}
	_, err := j.token(pos)
	return m, err
}

func (j *jsonReader) document(pos Position) (more bool, err error) {
	j.start(pos)
	tok, err := j.dec.Token()
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, j.wrap(pos, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return false, fmt.Errorf("%s is not an object", pos)
	}
	head := map[string]any{}
	cur := head
	listed := false
	for j.dec.More() {
		tok, err := j.token(pos)
		if err != nil {
			return false, err
		}
		key, _ := tok.(string)
		kind, _ := head["kind"].(string)
		if key == "items" && !listed && (kind == "" || strings.HasSuffix(kind, "List")) {
			first, err := j.token(pos)
			if err != nil {
				return false, err
			}
			if d, ok := first.(json.Delim); ok && d == '[' {
				if err := j.items(pos, head); err != nil {
					return false, err
				}
				listed = true
				cur = map[string]any{}
				j.start(pos)
				continue
			}
			v, err := j.rest(pos, first)
			if err != nil {
				return false, err
			}
			cur[key] = v
			continue
		}
		v, err := j.value(pos)
		if err != nil {
			return false, err
		}
		cur[key] = v
	}
	if _, err := j.token(pos); err != nil {
		return false, err
	}
	if listed {
		return true, j.v.ListEnd(pos, cur)
	}
	js, err := json.Marshal(head)
	if err != nil {
		return false, fmt.Errorf("%s: %w", pos, err)
	}
	return true, visitDocument(pos, Classify(js), j.v)
}

// items streams the items of a List, its "[" read.
func (j *jsonReader) items(pos Position, head map[string]any) error {
	if err := j.v.ListStart(pos, head); err != nil {
		return err
	}
	for n := 1; j.dec.More(); n++ {
		ipos := pos
		ipos.Item = n
		j.start(ipos)
		var js json.RawMessage
		if err := j.dec.Decode(&js); err != nil || j.cr.err != nil {
			return j.wrap(ipos, err)
		}
		if err := j.v.ListItem(ipos, Classify(js)); err != nil {
			return err
		}
	}
	_, err := j.token(pos)
	return err
}

// singleObject collects the documents of a file that must hold exactly one
// object (a policy test's input, check -f): a List counts as one document.
type singleObject struct {
	docs  []Object
	lists int
}

func (s *singleObject) Object(_ Position, obj Object) error {
	s.docs = append(s.docs, obj)
	return nil
}

func (s *singleObject) ListStart(Position, map[string]any) error {
	s.lists++
	return nil
}

func (*singleObject) ListItem(Position, Object) error        { return nil }
func (*singleObject) ListEnd(Position, map[string]any) error { return nil }

// ReadOneObject reads the one object a file holds, through the same bounded
// reader as dry-run; a List or more than one document is an error.
func ReadOneObject(name string) (Object, error) {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return Object{}, fmt.Errorf("%s: is a directory; this takes one file holding one object (dry-run -f takes directories)", name)
	}
	var s singleObject
	if err := ReadFile(name, &s); err != nil {
		return Object{}, err
	}
	switch {
	case s.lists > 0:
		return Object{}, fmt.Errorf("%s: holds a List; this takes one object, a pod or a workload (dry-run -f takes Lists)", name)
	case len(s.docs) != 1:
		return Object{}, fmt.Errorf("%s: holds %d objects; this takes one, a pod or a workload (dry-run -f takes several)", name, len(s.docs))
	}
	return s.docs[0], nil
}
