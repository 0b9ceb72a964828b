package output

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// IndentedJSON writes JSON-shaped values (what encoding/json decodes into
// any) byte for byte as json.MarshalIndent(v, prefix, "  ") writes them
// (TestIndentedJSONEquivalence), in one pass: MarshalIndent encodes through
// reflection, sorting each map's keys, then indents the result in a second
// pass. A string that is not printable ASCII free of what encoding/json
// escapes, and a number it would write with an exponent, are written by
// encoding/json itself; any other type makes it report false, and the
// caller uses MarshalIndent. Compact, it writes what json.Marshal writes:
// the pod's JSON for the typed decode.
type IndentedJSON struct {
	buf  []byte
	keys []string
	// compact writes as json.Marshal does: no line breaks, no spaces.
	compact bool
}

// CompactJSON returns v as json.Marshal does, written by IndentedJSON
// when it can; the bytes are the caller's.
func CompactJSON(v any) ([]byte, error) {
	w := IndentedJSON{compact: true}
	if w.value(v, "", 0) {
		return w.buf, nil
	}
	return json.Marshal(v)
}

// Marshal returns v as json.MarshalIndent(v, prefix, "  ") does; the
// bytes are valid until the next call.
func (w *IndentedJSON) Marshal(v any, prefix string) ([]byte, error) {
	w.buf = w.buf[:0]
	if w.value(v, prefix, 0) {
		return w.buf, nil
	}
	return json.MarshalIndent(v, prefix, "  ")
}

func (w *IndentedJSON) newline(prefix string, depth int) {
	if w.compact {
		return
	}
	w.buf = append(w.buf, '\n')
	w.buf = append(w.buf, prefix...)
	for range depth {
		w.buf = append(w.buf, "  "...)
	}
}

func (w *IndentedJSON) value(v any, prefix string, depth int) bool {
	switch t := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, t)
	case string:
		w.string(t)
	case float64:
		return w.number(t)
	case map[string]any:
		if w.nullOrEmpty(t == nil, len(t), "{}") {
			return true
		}
		start := len(w.keys)
		for k := range t {
			w.keys = append(w.keys, k)
		}
		keys := w.keys[start:]
		slices.Sort(keys)
		w.buf = append(w.buf, '{')
		for i, k := range keys {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.newline(prefix, depth+1)
			w.string(k)
			w.buf = append(w.buf, ':')
			if !w.compact {
				w.buf = append(w.buf, ' ')
			}
			if !w.value(t[k], prefix, depth+1) {
				w.keys = w.keys[:start]
				return false
			}
		}
		w.keys = w.keys[:start]
		w.newline(prefix, depth)
		w.buf = append(w.buf, '}')
	case []any:
		if w.nullOrEmpty(t == nil, len(t), "[]") {
			return true
		}
		w.buf = append(w.buf, '[')
		for i, e := range t {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.newline(prefix, depth+1)
			if !w.value(e, prefix, depth+1) {
				return false
			}
		}
		w.newline(prefix, depth)
		w.buf = append(w.buf, ']')
	default:
		return false
	}
	return true
}

// nullOrEmpty writes a nil map or slice as null and an empty one as
// empty, and reports whether it wrote it.
func (w *IndentedJSON) nullOrEmpty(isNil bool, n int, empty string) bool {
	switch {
	case isNil:
		w.buf = append(w.buf, "null"...)
	case n == 0:
		w.buf = append(w.buf, empty...)
	default:
		return false
	}
	return true
}

// string writes s quoted: as it is when it is printable ASCII without a
// quote, a backslash or one of encoding/json's HTML escapes (< > &), else
// as encoding/json writes it.
func (w *IndentedJSON) string(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			w.buf = append(w.buf, b...)
			return
		}
	}
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '"')
}

// number writes f as encoding/json does: without an exponent for zero
// and 1e-6 <= |f| < 1e21, else by encoding/json itself; false for what it
// cannot encode (NaN, infinities), which MarshalIndent reports.
func (w *IndentedJSON) number(f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return false
	}
	if abs := math.Abs(f); abs == 0 || abs >= 1e-6 && abs < 1e21 {
		w.buf = strconv.AppendFloat(w.buf, f, 'f', -1, 64)
		return true
	}
	b, err := json.Marshal(f)
	w.buf = append(w.buf, b...)
	return err == nil
}
