package mapexport

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp/syntax"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the small CEL-building helpers: literals, glob and label
// selector translations, and the quantity formatter.

// str returns s as a CEL string literal (single-quoted, so the JSON
// fragments of the status annotation read without escapes).
func str(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// each returns f of every element of xs.
func each[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// strList returns ss as a CEL list of string literals.
func strList(ss []string) string {
	return "[" + strings.Join(each(ss, str), ", ") + "]"
}

// jsonText returns s JSON-encoded exactly as encoding/json writes it inside a
// string, without the surrounding quotes: the status annotation the webhook
// writes is json.Marshal output, so static text is escaped the same way.
func jsonText(s string) string {
	b, _ := json.Marshal(s) // a string: cannot fail
	return string(b[1 : len(b)-1])
}

// and joins conditions with &&; an empty list is true.
func and(conds ...string) string { return join(" && ", "true", conds) }

// or joins conditions with ||; an empty list is false.
func or(conds ...string) string { return join(" || ", "false", conds) }

// join joins conds with op, leaving out empty ones and the operator's
// identity (true for &&, false for ||), which an empty list gives.
func join(op, identity string, conds []string) string {
	conds = slices.DeleteFunc(slices.Clone(conds), func(c string) bool { return c == "" || c == identity })
	switch len(conds) {
	case 0:
		return identity
	case 1:
		return conds[0]
	}
	return strings.Join(each(conds, paren), op)
}

func not(c string) string {
	switch c {
	case "true":
		return "false"
	case "false":
		return "true"
	}
	return "!" + paren(c)
}

// concat joins list expressions with +; an empty list is [].
func concat(lists []string) string {
	if len(lists) == 0 {
		return "[]"
	}
	return strings.Join(each(lists, paren), " + ")
}

// paren wraps an expression in parentheses unless it is a simple term.
func paren(e string) string {
	depth := 0
	quote := rune(0)
	for i, r := range e {
		switch {
		case quote != 0:
			if r == quote && e[i-1] != '\\' {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(' || r == '[' || r == '{':
			depth++
		case r == ')' || r == ']' || r == '}':
			depth--
		case depth == 0 && (r == ' ' || r == '?' || r == '!'):
			return "(" + e + ")"
		}
	}
	return e
}

// globRegexp translates a path.Match pattern into an RE2 regexp, without
// anchors, that matches the same names. Names here (namespaces, containers)
// never contain '/', which path.Match's * and ? do not cross.
func globRegexp(glob string) string {
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexpQuote(glob[i : i+1]))
			}
		case '[':
			b.WriteString("[")
			if i++; i < len(glob) && glob[i] == '^' {
				b.WriteString("^/")
				i++
			}
			for ; i < len(glob) && glob[i] != ']'; i++ {
				if glob[i] == '\\' && i+1 < len(glob) {
					i++
				}
				// '-' stays a range operator, escaped or not.
				if strings.IndexByte(`\[]^:`, glob[i]) >= 0 {
					b.WriteByte('\\')
				}
				b.WriteString(string(glob[i]))
			}
			b.WriteString("]")
		default:
			b.WriteString(regexpQuote(string(c)))
		}
	}
	return b.String()
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isGlob reports whether a glob has a wildcard: one without only matches
// its plainName and can go into a label selector.
func isGlob(glob string) bool { return strings.ContainsAny(glob, "*?[") }

// plainName unescapes a glob without wildcards.
func plainName(glob string) string { return strings.ReplaceAll(glob, `\`, "") }

// globsMatch returns a CEL condition: name matches one of globs.
func globsMatch(name string, globs []string) string {
	if slices.Contains(globs, "*") {
		return "true"
	}
	re := "^(?:" + strings.Join(each(globs, globRegexp), "|") + ")$"
	if _, err := syntax.Parse(re, syntax.Perl); err != nil {
		// Validation accepted the globs, so this is a bug in globRegexp.
		panic(fmt.Sprintf("glob %v translates to an invalid regexp %q: %v", globs, re, err))
	}
	return name + ".matches(" + str(re) + ")"
}

// selectorCEL returns a CEL condition equivalent to a metav1.LabelSelector
// over labels, a CEL expression of a string map.
func selectorCEL(labels string, sel *metav1.LabelSelector) string {
	var conds []string
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		conds = append(conds, fmt.Sprintf("%s[?%s].orValue('') == %s && %s in %s", labels, str(k), str(sel.MatchLabels[k]), str(k), labels))
	}
	for _, r := range sel.MatchExpressions {
		has := fmt.Sprintf("%s in %s", str(r.Key), labels)
		in := fmt.Sprintf("%s[?%s].orValue('') in %s", labels, str(r.Key), strList(r.Values))
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			conds = append(conds, and(has, in))
		case metav1.LabelSelectorOpNotIn:
			conds = append(conds, not(and(has, in)))
		case metav1.LabelSelectorOpExists:
			conds = append(conds, has)
		case metav1.LabelSelectorOpDoesNotExist:
			conds = append(conds, not(has))
		}
	}
	return and(conds...)
}

// Quantity formatting. The webhook writes resource.Quantity values, whose
// JSON is their canonical String(); a MAP computes with integers (bytes) and
// must spell the result the same way. Canonical form depends on the value
// and on the quantity's format, which a quantity takes from the suffix it
// was parsed with (Ki/Mi/.. binary, k/M/.. or none decimal, e3 exponent).

const (
	pow1024 = "[1, 1024, 1048576, 1073741824, 1099511627776, 1125899906842624, 1152921504606846976]"
	pow1000 = "[1, 1000, 1000000, 1000000000, 1000000000000, 1000000000000000, 1000000000000000000]"
)

// quantityClass returns a CEL expression of the format class ('bin', 'exp'
// or 'dec') of the quantity string expression s.
func quantityClass(s string) string {
	return fmt.Sprintf("(%s.endsWith('i') ? 'bin' : %s.matches('e[0-9]+$') ? 'exp' : 'dec')", s, s)
}

// formatQuantity returns a CEL expression that spells the non-negative
// integer expression v in the format class expression class exactly as
// resource.Quantity.String() does (CanonicalizeBytes): binary values of at
// least 1024 with the largest whole binary suffix, everything else with the
// largest whole decimal suffix (or exponent), zero as "0".
func formatQuantity(v, class string) string {
	// The largest power k of pow whose multiple v is, and v in its unit
	// plus suffix.
	largest := func(pow, suffix string) string {
		return fmt.Sprintf("[6, 5, 4, 3, 2, 1, 0].filter(qk, qv %% %s[qk] == 0).map(qk, string(qv / %s[qk]) + %s)[0]", pow, pow, suffix)
	}
	bin := largest(pow1024, "['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][qk]")
	dec := largest(pow1000, "(qf == 'exp' ? (qk == 0 ? '' : 'e' + string(3 * qk)) : ['', 'k', 'M', 'G', 'T', 'P', 'E'][qk])")
	return fmt.Sprintf("[%s].map(qf, [%s].map(qv, qv == 0 ? '0' : (qf == 'bin' && qv >= 1024) ? %s : %s)[0])[0]", class, v, bin, dec)
}

// canonicalQuantity returns a CEL expression of the canonical spelling of
// the quantity string expression s, as the webhook's Quantity.String().
func canonicalQuantity(s string) string {
	return fmt.Sprintf("[%s].map(qs, %s)[0]", s, formatQuantity("quantity(qs).asInteger()", quantityClass("qs")))
}

// layout breaks a long expression into lines at its top-level operators
// and method calls, so the YAML of an exported policy shows it as a
// readable block. CEL ignores the whitespace; string literals are never
// split.
func layout(e string) string {
	const width = 100
	if len(e) <= width || strings.Contains(e, "\n") {
		return e
	}
	var (
		lines []string
		start int
		depth int
		quote byte
	)
	for i := 0; i < len(e); i++ {
		switch c := e[i]; {
		case quote != 0:
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0 && i != start:
			for _, op := range []string{" && ", " || ", " ? ", " : ", " + ", ".filter(", ".map(", ".exists(", ".all("} {
				if strings.HasPrefix(e[i:], op) {
					lines = append(lines, strings.TrimSpace(e[start:i]))
					start = i
					break
				}
			}
		}
	}
	lines = append(lines, strings.TrimSpace(e[start:]))
	if len(lines) == 1 {
		return e
	}
	return strings.Join(lines, "\n  ")
}
