package kyvernoimport

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// selection is the containers a rule's part goes into by name: those a glob
// of include matches (every one when include is empty) and none of exclude
// does, as a SandboxPolicy's spec.containers selects them.
type selection struct {
	include, exclude []string
}

func (s selection) empty() bool { return len(s.include) == 0 && len(s.exclude) == 0 }

func (s selection) equal(o selection) bool {
	return slices.Equal(s.include, o.include) && slices.Equal(s.exclude, o.exclude)
}

// kyvernoRange is a string Kyverno reads as a range of numbers (1-5, 1!-5),
// not as a name.
var kyvernoRange = regexp.MustCompile(`^[-|+]?\d+(?:\.\d+)?[A-Za-z]*!?-[-|+]?\d+(?:\.\d+)?[A-Za-z]*$`)

// nameGlob checks a glob of container names that Kyverno matches with its
// wildcards (* any run, ? one character) and the SandboxPolicy with
// path.Match alike: the characters of a name, * and ?, and nothing Kyverno
// reads as a number, a quantity, a duration or a range before it compares
// names.
func nameGlob(g string) string {
	switch {
	case g == "":
		return "an empty name"
	case strings.Trim(g, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._*?") != "":
		return fmt.Sprintf("%q holds characters a container name does not (Kyverno compares them as written, a SandboxPolicy's globs may read them as pattern syntax)", g)
	case kyvernoRange.MatchString(g):
		return fmt.Sprintf("%q is a range of numbers to Kyverno", g)
	}
	if _, err := resource.ParseQuantity(g); err == nil {
		return fmt.Sprintf("%q is a quantity to Kyverno, which compares it as one", g)
	}
	if _, err := time.ParseDuration(g); err == nil {
		return fmt.Sprintf("%q is a duration to Kyverno, which compares it as one", g)
	}
	return ""
}

// anchorSelection reads the pattern of a (name) anchor: globs joined by |
// (any of them), or one glob and negated ones joined by & (it, and none of
// them).
func anchorSelection(pattern string) (selection, string) {
	var s selection
	if alts := strings.Split(pattern, "|"); len(alts) > 1 {
		for _, a := range alts {
			a = strings.TrimSpace(a)
			if strings.ContainsAny(a, "&!<>") {
				return s, fmt.Sprintf("%q joins negations or comparisons with |: a SandboxPolicy's selection is globs to include, less globs to exclude", pattern)
			}
			if why := nameGlob(a); why != "" {
				return s, why
			}
			s.include = append(s.include, a)
		}
		return s, ""
	}
	for _, t := range strings.Split(pattern, "&") {
		t = strings.TrimSpace(t)
		neg := strings.HasPrefix(t, "!")
		g := strings.TrimPrefix(t, "!")
		if why := nameGlob(g); why != "" {
			return s, why
		}
		switch {
		case neg:
			s.exclude = append(s.exclude, g)
		case s.include != nil:
			return s, fmt.Sprintf("%q asks for two names at once", pattern)
		case g != "*":
			s.include = []string{g}
		}
	}
	return s, ""
}

// foreachSelection reads the preconditions of a foreach entry that decide
// on the element's name alone: Equals, AnyIn (the element is one of the
// globs), NotEquals, AnyNotIn (none of them); all of them must hold, or any
// one of the include conditions.
func foreachSelection(v any, path *field.Path) (selection, *field.Path, string) {
	var s selection
	var conds []any
	condPath := path
	var anyOf bool
	switch p := v.(type) {
	case []any:
		conds = p
	case map[string]any:
		for _, k := range sortedKeys(p) {
			list, _ := p[k].([]any)
			switch {
			case k != "all" && k != "any":
				return s, path.Child(k), "preconditions other than all and any"
			case len(list) == 0:
				continue
			case conds != nil:
				return s, path, "all and any conditions together cannot be expressed as one selection of containers"
			}
			anyOf = k == "any" && len(list) > 1
			conds, condPath = list, path.Child(k)
		}
	default:
		return s, path, "not a list of conditions"
	}
	for i, c := range conds {
		cp := condPath.Index(i)
		m, _ := c.(map[string]any)
		key, _ := m["key"].(string)
		if !elementName.MatchString(key) {
			return s, cp.Child("key"), "a condition on another value than the element's name ({{ element.name }}): a SandboxPolicy selects containers by name only"
		}
		values, ok := conditionValues(m["value"])
		if !ok {
			return s, cp.Child("value"), "a value that is not a name"
		}
		if len(values) == 0 {
			return s, cp.Child("value"), "no names to compare with"
		}
		for _, g := range values {
			if why := nameGlob(g); why != "" {
				return s, cp.Child("value"), why
			}
		}
		op, _ := m["operator"].(string)
		switch op {
		case "Equals", "NotEquals":
			// Kyverno reads a name that looks like a number, quantity or
			// duration as one before it compares: a glob that could match
			// such a name would differ.
			if len(values) > 1 {
				return s, cp.Child("value"), op + " compares with one name"
			}
			if c := values[0][0]; c < 'a' || c > 'z' {
				return s, cp.Child("value"), fmt.Sprintf("%q: Kyverno's %s reads a name that looks like a number first as a number; a name starting with a letter is compared as written", values[0], op)
			}
		case "AnyIn", "AnyNotIn":
		default:
			return s, cp.Child("operator"), fmt.Sprintf("operator %q: a SandboxPolicy's selection converts Equals, AnyIn, NotEquals and AnyNotIn on the element's name", op)
		}
		switch {
		case op == "Equals" || op == "AnyIn":
			if s.include != nil && !anyOf {
				return s, cp, "two conditions that both select names: a SandboxPolicy's selection includes the names any of its globs matches"
			}
			s.include = append(s.include, values...)
		case anyOf:
			return s, cp, "any of conditions that exclude names: a SandboxPolicy excludes the names any of its globs matches, in every container it selects"
		default:
			s.exclude = append(s.exclude, values...)
		}
	}
	return s, nil, ""
}

// selects records which containers a part of the rule goes into: all its
// parts must go into the same ones.
func (r *ruleConverter) selects(inj *injection, s selection, path *field.Path) bool {
	if inj.sel == nil {
		inj.sel = &s
		return true
	}
	if !inj.sel.equal(s) {
		r.leave(path, "selects other containers by name than the rule's other parts; a SandboxPolicy puts all its parts into the same containers")
		return false
	}
	return true
}
