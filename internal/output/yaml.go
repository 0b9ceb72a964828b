// Package output writes what the commands print: dry-run's objects as YAML,
// as sigs.k8s.io/yaml writes it, for the JSON-shaped values (what
// encoding/json decodes into any) the commands hold, and text with the
// control characters of its input escaped.
package output

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	yamlv2 "go.yaml.in/yaml/v2"
)

// MarshalYAML is sigs.k8s.io/yaml.Marshal for the JSON-shaped values dry-run
// holds (what encoding/json decodes into any), without its round trip
// through JSON: the same go-yaml encoder on the same values, byte for byte
// the same output (TestMarshalYAMLEquivalence), in a third of the time.
// yaml.Marshal writes JSON and parses it back with go-yaml, which turns a
// number without a fraction into an int; yamlValue does the same here.
func MarshalYAML(v any) ([]byte, error) {
	return yamlv2.Marshal(yamlValue(v))
}

// yamlValue returns v with every float64 that JSON writes as an integer (no
// fraction, no exponent) as an int64, as go-yaml reads it back. Maps and
// slices are copied, not changed.
func yamlValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = yamlValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = yamlValue(e)
		}
		return out
	case float64:
		// encoding/json writes an integral |f| < 1e21 as its digits,
		// which go-yaml parses as an int64, else as a uint64, else as
		// a float64.
		if t != math.Trunc(t) || math.Abs(t) >= 1e21 {
			return t
		}
		digits := strconv.FormatFloat(t, 'f', -1, 64)
		if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(digits, 10, 64); err == nil {
			return u
		}
		return t
	}
	return v
}

// BlockYAML writes JSON-shaped values in go-yaml's block style, byte for
// byte what MarshalYAML writes (TestBlockYAMLEquivalence), for the values a
// pod or workload holds, in a fraction of the time: go-yaml builds an event
// for every node and analyses every scalar in its emitter. Scalars that
// are not plainly safe are rendered by go-yaml itself, one at a time, and
// remembered; what BlockYAML does not write the same way with certainty
// (a string with a line break, one long enough that go-yaml would fold it,
// a sequence directly in a sequence, a key longer than a simple key) makes
// it report false, and the caller marshals the value with go-yaml.
type BlockYAML struct {
	buf []byte
	// scalars holds go-yaml's rendering of scalars that are not plainly
	// safe; it is emptied when full, so memory stays bounded.
	scalars map[any]string
	// folds holds go-yaml's rendering of long strings at a column.
	folds map[foldKey]string
}

const (
	yamlWidth       = 80  // go-yaml folds a scalar at a space past this column
	yamlSimpleKey   = 128 // go-yaml writes a longer key as a complex key
	maxScalarCache  = 4096
	maxCachedScalar = 256
	maxFoldedScalar = 4096
)

// Document returns v, a map, written as a whole document; ok is false when
// the caller must marshal it with go-yaml. The bytes are w's own, valid
// until its next use.
func (w *BlockYAML) Document(v map[string]any) ([]byte, bool) {
	w.buf = w.buf[:0]
	if len(v) == 0 {
		w.buf = append(w.buf, "{}\n"...)
	} else if !w.mapping(v, 0, 0) {
		return nil, false
	}
	return w.buf, true
}

// Item returns v written as one item of a List's items (what follows
// ItemsKey); ok is false when the caller must marshal it with go-yaml. The
// bytes are w's own, valid until its next use.
func (w *BlockYAML) Item(v any) ([]byte, bool) {
	w.buf = w.buf[:0]
	if !w.sequence([]any{v}, 0) {
		return nil, false
	}
	return w.buf, true
}

// mapping writes the keys of m, each on a line at column indent, except
// the first, which continues the current line at column col (after "- ").
func (w *BlockYAML) mapping(m map[string]any, indent, col int) bool {
	keys := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	for i, k := range keys {
		if i > 0 {
			w.indent(indent)
			col = indent
		}
		key, ok := w.scalar(k)
		if !ok || len(key) > yamlSimpleKey {
			return false
		}
		w.buf = append(w.buf, key...)
		w.buf = append(w.buf, ':')
		col += len(key) + 1
		switch v := m[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				w.buf = append(w.buf, " {}\n"...)
				continue
			}
			w.buf = append(w.buf, '\n')
			w.indent(indent + 2)
			if !w.mapping(v, indent+2, indent+2) {
				return false
			}
		case []any:
			if len(v) == 0 {
				w.buf = append(w.buf, " []\n"...)
				continue
			}
			w.buf = append(w.buf, '\n')
			if !w.sequence(v, indent) {
				return false
			}
		default:
			w.buf = append(w.buf, ' ')
			if w.value(v, col+1) {
				continue
			}
			if str, ok := v.(string); !ok || !w.folded(str, indent, col+1) {
				return false
			}
		}
	}
	return true
}

type foldKey struct {
	s           string
	indent, col int
}

// folded writes a string value that go-yaml may fold, of a key at column
// indent, starting at column col, as go-yaml writes it there: it marshals
// the string as the value of a key of the same length at the same depth,
// and takes what follows the key. It reports false, writing nothing, for
// a string it does not write so.
func (w *BlockYAML) folded(s string, indent, col int) bool {
	if !strings.Contains(s, " ") || strings.ContainsAny(s, "\n\r") || len(s) > maxFoldedScalar {
		return false
	}
	k := foldKey{s, indent, col}
	if r, ok := w.folds[k]; ok {
		w.buf = append(w.buf, r...)
		return true
	}
	keyLen := col - 2 - indent
	if keyLen < 1 || indent%2 != 0 {
		return false
	}
	var v any = map[string]any{strings.Repeat("k", keyLen): s}
	for range indent / 2 {
		v = map[string]any{"k": v}
	}
	b, err := yamlv2.Marshal(v)
	if err != nil {
		return false
	}
	out := string(b)
	for d := range indent / 2 {
		prefix := strings.Repeat(" ", 2*d) + "k:\n"
		var ok bool
		if out, ok = strings.CutPrefix(out, prefix); !ok {
			return false
		}
	}
	out, ok := strings.CutPrefix(out, strings.Repeat(" ", indent)+strings.Repeat("k", keyLen)+": ")
	if !ok {
		return false
	}
	if w.folds == nil || len(w.folds) >= maxScalarCache {
		w.folds = make(map[foldKey]string, 16)
	}
	w.folds[k] = out
	w.buf = append(w.buf, out...)
	return true
}

// sequence writes the items of s, each on a line at column indent.
func (w *BlockYAML) sequence(s []any, indent int) bool {
	for _, item := range s {
		w.indent(indent)
		w.buf = append(w.buf, "- "...)
		switch v := item.(type) {
		case map[string]any:
			if len(v) == 0 {
				w.buf = append(w.buf, "{}\n"...)
				continue
			}
			if !w.mapping(v, indent+2, indent+2) {
				return false
			}
		case []any:
			if len(v) > 0 {
				return false
			}
			w.buf = append(w.buf, "[]\n"...)
		default:
			if !w.value(v, indent+2) {
				return false
			}
		}
	}
	return true
}

// value writes a scalar that starts at column col, and its line break.
func (w *BlockYAML) value(v any, col int) bool {
	s, ok := w.scalar(v)
	if !ok {
		return false
	}
	if col+len(s) > yamlWidth && strings.Contains(s, " ") {
		return false // go-yaml may fold it
	}
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\n')
	return true
}

func (w *BlockYAML) indent(n int) {
	for range n {
		w.buf = append(w.buf, ' ')
	}
}

// scalar returns how go-yaml writes the scalar v, on one line.
func (w *BlockYAML) scalar(v any) (string, bool) {
	switch t := v.(type) {
	case nil:
		return "null", true
	case bool:
		return strconv.FormatBool(t), true
	case string:
		if plainlySafe(t) {
			return t, true
		}
		if strings.ContainsAny(t, "\n\r") || len(t) > yamlWidth && strings.Contains(t, " ") {
			return "", false
		}
	case float64:
		switch y := yamlValue(t).(type) {
		case int64:
			return strconv.FormatInt(y, 10), true
		case uint64:
			return strconv.FormatUint(y, 10), true
		}
	default:
		return "", false
	}
	if s, ok := w.scalars[v]; ok {
		return s, true
	}
	b, err := yamlv2.Marshal(yamlValue(v))
	if err != nil {
		return "", false
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || strings.Contains(s, "\n") {
		return "", false
	}
	if len(s) > maxCachedScalar {
		return s, true
	}
	if w.scalars == nil || len(w.scalars) >= maxScalarCache {
		w.scalars = make(map[any]string, 64)
	}
	w.scalars[v] = s
	return s, true
}

// plainlySafe reports whether go-yaml writes s as it is: a letter, then
// letters, digits and . _ / -, and not a word YAML 1.1 reads as a boolean or
// null.
func plainlySafe(s string) bool {
	if s == "" || !isASCIILetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isASCIILetter(c) && (c < '0' || c > '9') && c != '.' && c != '_' && c != '/' && c != '-' {
			return false
		}
	}
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE",
		"on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL":
		return false
	}
	return true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// keyLess is go-yaml's order of string keys (its keyList.Less): letters
// before other characters, runs of digits by their number.
func keyLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			continue
		}
		al := unicode.IsLetter(ar[i])
		bl := unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an = 1
					bn = 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}

// ItemsKey is how a List's items key starts in YAML: a List is written
// head, items one by one, then tail.
const ItemsKey = "items:\n"
