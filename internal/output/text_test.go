package output

import "testing"

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, control, lines string }{
		{"plain näme", "plain näme", "plain näme"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"fail\rPASS", `fail\x0dPASS`, `fail\x0dPASS`},
		{"one\n\ttwo", `one\x0a\x09two`, "one\n\ttwo"},
		{"bell\x07 del\x7f c1\u009b", `bell\x07 del\x7f c1\u009b`, `bell\x07 del\x7f c1\u009b`},
		{"rtl\u202egnp.exe \u2066iso\u2069", `rtl\u202egnp.exe \u2066iso\u2069`, `rtl\u202egnp.exe \u2066iso\u2069`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
	} {
		if got := EscapeControl(c.in); got != c.control {
			t.Errorf("EscapeControl(%q) = %q, want %q", c.in, got, c.control)
		}
		if got := EscapeLines(c.in); got != c.lines {
			t.Errorf("EscapeLines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
}
