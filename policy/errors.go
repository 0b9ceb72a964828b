package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Problem is one thing wrong with one policy document or file.
type Problem struct {
	// Source is "file" or "file#N" for the Nth non-empty document of a file
	// with several documents.
	Source string
	// Policy is the document's metadata.name; empty when unknown.
	Policy string
	// Err says which field is wrong and what is allowed. Err.Field is the
	// path inside the document (spec.caches[0].sizeLimit); it is empty when
	// the problem concerns the whole document or file.
	Err *field.Error
}

// String renders the problem as one line, "source (policy): field: what is
// wrong", leaving out the parts that are unknown:
//
//	examples/x.yaml#2 (uv-cache): spec.caches[0].sizeLimit: Invalid value: "1 Gi": must be a quantity such as 1Gi
//	examples/y.yaml: invalid YAML: line 7: did not find expected key
func (p Problem) String() string {
	s := p.Source
	if p.Policy != "" {
		s += " (" + p.Policy + ")"
	}
	if p.Err.Field == "" {
		return s + ": " + p.Err.Detail // a problem with the whole document
	}
	return s + ": " + p.Err.Error()
}

// Error is every problem found while loading or compiling policies. Load,
// Parse, ParseSet and NewSet return it (as error) on failure.
type Error struct {
	Problems []Problem
}

// Error prints one problem per line, in the order they were found.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problemsOf attributes errs to one document.
func problemsOf(source, name string, errs field.ErrorList) []Problem {
	out := make([]Problem, len(errs))
	for i, e := range errs {
		out[i] = Problem{Source: source, Policy: name, Err: e}
	}
	return out
}

// asError returns nil when there are no problems, so that a nil *Error never
// hides inside a non-nil error.
func asError(ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	return &Error{Problems: ps}
}

// orProblems returns v, or the zero value and an *Error when there are
// problems.
func orProblems[T any](v T, ps []Problem) (T, error) {
	if err := asError(ps); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// documentError is a problem with a whole document or file: no field path
// and no value, only the detail, which is all Problem.String prints of it.
func documentError(detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeInvalid, BadValue: field.OmitValueType{}, Detail: detail}
}
