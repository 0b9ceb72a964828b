package mutate

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The API server drops a warning that is not valid UTF-8 or holds a control
// character, and once the warnings of a request exceed 4096 runes it cuts
// every one to 256 runes (k8s.io/apiserver/pkg/endpoints/filters/warning.go).
// Pod makes its warnings fit those rules, so what kubectl shows after an
// admission and what dry-run prints are the same, whole and predictable.
const (
	maxWarningRunes      = 256
	maxTotalWarningRunes = 4096
)

// clientWarnings returns warnings the API server passes on unchanged:
// valid UTF-8 without control characters, deduplicated, each at most 256
// runes, together at most 4096 runes. When some do not fit, the last one
// says how many were left out.
func clientWarnings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(in))
	var out []string
	total, omitted := 0, 0
	const omittedRoom = 64 // room kept for the "N more" line
	for _, w := range in {
		w = cleanWarning(w)
		if w == "" || seen[w] {
			continue
		}
		seen[w] = true
		n := utf8.RuneCountInString(w)
		if total+n > maxTotalWarningRunes-omittedRoom {
			omitted++
			continue
		}
		total += n
		out = append(out, w)
	}
	if omitted > 0 {
		out = append(out, fmt.Sprintf("sandbox-webhook: %d more warnings not shown", omitted))
	}
	return out
}

func cleanWarning(w string) string {
	w = strings.ToValidUTF8(w, "\uFFFD")
	w = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, w)
	w = strings.TrimSpace(w)
	if utf8.RuneCountInString(w) > maxWarningRunes {
		w = string([]rune(w)[:maxWarningRunes-1]) + "…"
	}
	return w
}
