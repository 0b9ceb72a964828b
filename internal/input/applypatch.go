package input

import (
	"fmt"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// ApplyOps applies the webhook's JSONPatch operations (add, replace and
// remove, as the core emits them) to doc in place, as strictly as the
// apiserver applies them (evanphx/json-patch): an add needs its parent, a
// replace or remove its target, an array index must be in range. dry-run
// holds every object as decoded JSON, so patching it there spares encoding
// the object, parsing it into json-patch's own tree and decoding the result
// (TestApplyPatch checks the two agree). The operations' values, as
// encoding/json decodes them (GenericOps), become part of doc.
func ApplyOps(doc map[string]any, ops []jsonpatch.Operation) error {
	for _, op := range ops {
		switch op.Operation {
		case "add", "replace", "remove":
		default:
			return fmt.Errorf("%s %s: unsupported operation", op.Operation, op.Path)
		}
		if !strings.HasPrefix(op.Path, "/") {
			return fmt.Errorf("%s %q: not a JSON pointer to a member", op.Operation, op.Path)
		}
		tokens := strings.Split(op.Path[1:], "/")
		for i, t := range tokens {
			tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
		if _, err := applyAt(doc, tokens, op); err != nil {
			return fmt.Errorf("%s %s: %w", op.Operation, op.Path, err)
		}
	}
	return nil
}

// applyAt applies op at tokens below node and returns the node (a new slice
// when an array changed length).
func applyAt(node any, tokens []string, op jsonpatch.Operation) (any, error) {
	tok := tokens[0]
	if len(tokens) > 1 {
		switch n := node.(type) {
		case map[string]any:
			child, ok := n[tok]
			if !ok {
				return nil, fmt.Errorf("missing %q", tok)
			}
			c, err := applyAt(child, tokens[1:], op)
			if err != nil {
				return nil, err
			}
			n[tok] = c
			return n, nil
		case []any:
			i, err := index(tok, len(n)-1)
			if err != nil {
				return nil, err
			}
			c, err := applyAt(n[i], tokens[1:], op)
			if err != nil {
				return nil, err
			}
			n[i] = c
			return n, nil
		}
		return nil, fmt.Errorf("%q is not an object or array", tok)
	}
	switch n := node.(type) {
	case map[string]any:
		_, ok := n[tok]
		switch {
		case op.Operation == "add":
			n[tok] = op.Value
		case !ok:
			return nil, fmt.Errorf("missing %q", tok)
		case op.Operation == "replace":
			n[tok] = op.Value
		default:
			delete(n, tok)
		}
		return n, nil
	case []any:
		if op.Operation == "add" {
			if tok == "-" {
				return append(n, op.Value), nil
			}
			i, err := index(tok, len(n))
			if err != nil {
				return nil, err
			}
			n = append(n, nil)
			copy(n[i+1:], n[i:])
			n[i] = op.Value
			return n, nil
		}
		i, err := index(tok, len(n)-1)
		if err != nil {
			return nil, err
		}
		if op.Operation == "replace" {
			n[i] = op.Value
			return n, nil
		}
		return append(n[:i], n[i+1:]...), nil
	}
	return nil, fmt.Errorf("the parent of %q is not an object or array", tok)
}

// index parses an array index no larger than max.
func index(tok string, maxIndex int) (int, error) {
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i > maxIndex || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("array index %q out of range", tok)
	}
	return i, nil
}
