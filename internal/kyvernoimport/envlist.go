package kyvernoimport

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// ownValue is how a foreach reads its element's own value of a variable:
// element.env[?name=='NAME'].value | [0], or element.env[?name=='NAME'] |
// [0].value; NAME a raw string (in double quotes JMESPath reads a field).
var ownValue = regexp.MustCompile(`\{\{\s*element\.env\[\?\s*name\s*==\s*'([^'\\]*)'\s*\](?:\.value\s*\|\s*\[0\]|\s*\|\s*\[0\]\.value)\s*\}\}`)

// listSeparators are the separators of list variables that a Kyverno
// value may put between the entry and the container's own value.
const listSeparators = ":;,"

// listEntry reads the value a foreach's strategic merge gives its
// element's variable name as an entry added to the container's own value:
// ENTRY SEP {{own}} (prepend) or {{own}} SEP ENTRY (append), where own is
// that container's own value of name and nothing else. Those are the
// shapes whose result, on a container that sets name to a plain value, is
// what the webhook's env entry gives it; ok is false for any other.
func listEntry(name, value string) (policy.EnvVar, bool) {
	locs := ownValue.FindAllStringSubmatchIndex(value, -1)
	if len(locs) != 1 || value[locs[0][2]:locs[0][3]] != name {
		return policy.EnvVar{}, false
	}
	before, after := value[:locs[0][0]], value[locs[0][1]:]
	e := policy.EnvVar{Name: name}
	switch {
	case before != "" && after == "":
		e.Position, e.Value, e.Separator = policy.Prepend, before[:len(before)-1], before[len(before)-1:]
	case before == "" && after != "":
		e.Position, e.Separator, e.Value = policy.Append, after[:1], after[1:]
	default:
		return policy.EnvVar{}, false
	}
	if !strings.Contains(listSeparators, e.Separator) || e.Value == "" ||
		strings.Contains(e.Value, e.Separator) || strings.ContainsAny(e.Value, "{}") {
		return policy.EnvVar{}, false
	}
	return e, true
}

// listEntryDifference says what Kyverno does with the rule of e where the
// webhook's env entry does otherwise: on containers whose own value of
// the variable is not a plain value, or has the entry in its place.
func listEntryDifference(e policy.EnvVar) string {
	with := func(own string) string {
		if e.Position == policy.Prepend {
			return e.Value + e.Separator + own
		}
		return own + e.Separator + e.Value
	}
	where, place := "before", "first"
	if e.Position == policy.Append {
		where, place = "after", "last"
	}
	return fmt.Sprintf("Kyverno writes %[1]s whole from the container's own value: a container without %[1]s gets %[2]q, "+
		"one that sets %[1]s from valueFrom gets both value %[2]q and valueFrom (a pod the API server refuses), "+
		"one whose %[1]s has %[3]s %[4]s already gets it a second time (%[5]q for %[6]q), and one whose %[1]s is empty %[2]q (the request leaves an empty value out); "+
		"sandbox-webhook adds %[3]s once, %[7]s the container's own value, gives an empty %[1]s %[3]q, and leaves a container without %[1]s or with %[1]s from valueFrom as it is, with a warning "+
		"(ifUnset, written by hand, gives the first the image's own list with the entry)",
		e.Name, with("null"), e.Value, place, with(e.Value), e.Value, where)
}
