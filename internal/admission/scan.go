package admission

import "bytes"

// scanReview walks an AdmissionReview that is valid JSON, in one pass, and
// returns the bytes of request.object (nil when the request has none or it
// is not an object). ok is false when a decoder that matches keys
// case-insensitively, as the API machinery's kind detection does, could read
// the review or its object differently from the case-sensitive decode of the
// handler: a key that is apiVersion or kind in another case or spelled
// with an escape, a key named twice. Such reviews are refused.
func scanReview(body []byte) (object []byte, ok bool) {
	s := scanner{b: body}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, false
	}
	review := headKeys()
	var request bool
	ok = s.object(func(key []byte, escaped bool) bool {
		if !review(key, escaped) {
			return false
		}
		if string(key) != "request" {
			s.value()
			return true
		}
		if request {
			return false
		}
		request = true
		if s.b[s.i] != '{' {
			s.value()
			return true
		}
		var seen bool
		return s.object(func(key []byte, escaped bool) bool {
			if escaped {
				return false
			}
			if string(key) != "object" {
				s.value()
				return true
			}
			if seen {
				return false
			}
			seen = true
			if s.b[s.i] != '{' {
				s.value()
				return true
			}
			start := s.i
			pod := headKeys()
			if !s.object(func(key []byte, escaped bool) bool {
				if !pod(key, escaped) {
					return false
				}
				s.value()
				return true
			}) {
				return false
			}
			object = s.b[start:s.i]
			return true
		})
	})
	if !ok {
		return nil, false
	}
	return object, true
}

// headKeys returns a check of the keys of one object: apiVersion and kind
// exactly spelled, at most once, never escaped, and no other key that
// matches either without regard to case.
func headKeys() func(key []byte, escaped bool) bool {
	var apiVersion, kind bool
	return func(key []byte, escaped bool) bool {
		switch {
		case escaped:
			return false
		case string(key) == "apiVersion":
			if apiVersion {
				return false
			}
			apiVersion = true
		case string(key) == "kind":
			if kind {
				return false
			}
			kind = true
		case bytes.EqualFold(key, []byte("apiVersion")), bytes.EqualFold(key, []byte("kind")):
			return false
		}
		return true
	}
}

// object walks the JSON object at s.i (valid JSON), calling member with
// each key (its bytes between the quotes, and whether it holds an escape)
// and the scanner at the key's value, which member must skip or walk. It
// stops, returning false, when member does.
func (s *scanner) object(member func(key []byte, escaped bool) bool) bool {
	s.i++ // '{'
	for {
		s.space()
		if s.i >= len(s.b) {
			return true
		}
		switch s.b[s.i] {
		case '}':
			s.i++
			return true
		case ',':
			s.i++
			s.space()
		}
		start := s.i + 1
		escaped := s.str()
		key := s.b[start : s.i-1]
		s.space()
		s.i++ // ':'
		s.space()
		if !member(key, escaped) {
			return false
		}
	}
}

// scanner skips over parts of valid JSON.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str skips the string at s.i and reports whether it holds an escape.
func (s *scanner) str() (escaped bool) {
	b := s.b
	start := s.i + 1 // after the opening quote
	i := start
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			s.i = len(b)
			return escaped || bytes.IndexByte(b[start:], '\\') >= 0
		}
		q := i + j
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for k := q - 1; k >= start && b[k] == '\\'; k-- {
			n++
		}
		if !escaped && bytes.IndexByte(b[i:q], '\\') >= 0 {
			escaped = true
		}
		if n%2 == 0 {
			s.i = q + 1
			return escaped
		}
		i = q + 1
	}
}

// structural marks the bytes value must look at inside an object or array.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// value skips the value at s.i.
func (s *scanner) value() {
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		b, i, depth := s.b, s.i, 0
		for i < len(b) {
			c := b[i]
			if !structural[c] {
				i++
				continue
			}
			switch c {
			case '"':
				s.i = i
				s.str()
				i = s.i
				continue
			case '{', '[':
				depth++
			default:
				depth--
			}
			i++
			if depth == 0 {
				break
			}
		}
		s.i = i
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}
