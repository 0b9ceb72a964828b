package textout

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EscapeControl returns s with every control character, bidirectional
// override and invalid UTF-8 byte replaced by its Go escape, everything else
// kept (the text is not quoted). Names, reasons and file contents a command
// prints come from its input, and a pod named "\x1b[2J" must not clear the
// terminal, nor a case name ending in "\r" print a PASS over a FAIL.
func EscapeControl(s string) string { return escape(s, false) }

// EscapeLines is EscapeControl keeping newlines and tabs, for multi-line
// text such as an error that lists several problems.
func EscapeLines(s string) string { return escape(s, true) }

// NewTextWriter returns a writer that passes what is written through
// EscapeLines. Every human-readable report of test and check goes through
// one. A Write is escaped on its own, so a character split across two
// Writes is escaped byte by byte; fmt's printers write whole strings.
func NewTextWriter(w io.Writer) io.Writer { return textWriter{w} }

type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, EscapeLines(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escaped reports whether r is escaped: a control character, or a Unicode
// bidirectional embedding, override or isolate, which reorders what a
// terminal shows.
func escaped(r rune) bool {
	return unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func escape(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (escaped(r) && (!keepLines || (r != '\n' && r != '\t'))) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case escaped(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}
