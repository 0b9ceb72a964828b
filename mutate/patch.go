package mutate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// Patch returns the JSONPatch that turns raw, the pod as the client sent it,
// into mutated. original is raw decoded into a typed Pod; mutated is what
// Pod made of it.
//
// A typed round trip drops fields the compiled k8s.io/api does not know, so a
// plain diff of raw against mutated would remove them. Like controller-runtime's
// defaulter, Patch drops such "remove" operations; unlike it, it keeps the
// removals the core intends (a converted emptyDir's medium, an overridden
// env var's valueFrom): those are paths the typed original still has. It also
// drops additions of empty objects (resources: {}, status: {}), which only
// the typed encoding introduces; the core never adds an empty object. The
// operations are in path order, so the same mutation always gives the same
// patch.
//
// Every value the typed round trip spells differently (a quantity such as
// 2048Mi becomes 2Gi) is rewritten too, as the API server would store it.
//
// metadata.managedFields plays no part: the core never writes it, and the
// API server computes it again after admission. It is left out of both
// sides of the diff, so that its fieldsV1, which the decoder keeps as raw
// bytes, is never decoded into generic maps (a pod with 700 env entries
// holds about 2,800 objects there).
func Patch(raw []byte, original, mutated *corev1.Pod) ([]jsonpatch.Operation, error) {
	if len(mutated.ManagedFields) > 0 {
		withoutFields := *mutated
		withoutFields.ManagedFields = nil
		mutated = &withoutFields
		var err error
		if raw, err = withoutManagedFields(raw); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(mutated)
	if err != nil {
		return nil, fmt.Errorf("encoding mutated pod: %w", err)
	}
	ops, err := jsonpatch.CreatePatch(raw, out)
	if err != nil {
		return nil, fmt.Errorf("computing patch: %w", err)
	}
	return keepIntended(ops, original)
}

// withoutManagedFields is raw without metadata.managedFields. The object
// and its metadata are read one level deep, as raw values: nothing below
// them is decoded.
func withoutManagedFields(raw []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(doc["metadata"], &meta); err != nil {
		return nil, fmt.Errorf("decoding the pod's metadata: %w", err)
	}
	delete(meta, "managedFields")
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	doc["metadata"] = b
	return json.Marshal(doc)
}

// keepIntended is what Patch keeps of the operations of a plain diff from
// the pod as the client sent it to the encoding of mutated: every one but
// the removals of what only the typed round trip of original lost and the
// additions of empty objects, in path order.
func keepIntended(ops []jsonpatch.Operation, original *corev1.Pod) ([]jsonpatch.Operation, error) {
	var typed any // the typed original as generic JSON, decoded on first need
	kept := ops[:0]
	for _, op := range ops {
		if op.Operation == "add" && isEmptyObject(op.Value) {
			continue
		}
		if op.Operation == "remove" {
			if typed == nil {
				b, err := json.Marshal(original)
				if err != nil {
					return nil, fmt.Errorf("encoding original pod: %w", err)
				}
				if err := json.Unmarshal(b, &typed); err != nil {
					return nil, fmt.Errorf("decoding original pod: %w", err)
				}
			}
			if !pointerExists(typed, op.Path) {
				continue
			}
		}
		kept = append(kept, op)
	}
	sortOps(kept)
	return kept, nil
}

// sortOps puts operations in path order, so the same mutation always gives
// the same patch (the diff walks maps in random order). Numeric segments
// compare as numbers, so appends to one array keep their ascending order.
// The core only appends to arrays and changes fields in place, so no two
// operations depend on each other's order beyond that.
func sortOps(ops []jsonpatch.Operation) {
	sort.SliceStable(ops, func(i, j int) bool { return pathLess(ops[i].Path, ops[j].Path) })
}

func pathLess(a, b string) bool {
	for {
		as, arest, amore := strings.Cut(a, "/")
		bs, brest, bmore := strings.Cut(b, "/")
		if as != bs {
			if isIndex(as) && isIndex(bs) {
				ai, aerr := strconv.Atoi(as)
				bi, berr := strconv.Atoi(bs)
				if aerr == nil && berr == nil {
					return ai < bi
				}
			}
			return as < bs
		}
		if !amore || !bmore {
			return !amore && bmore
		}
		a, b = arest, brest
	}
}

// isIndex reports whether a path segment may be a number to strconv.Atoi,
// which allocates its error for the others: digits, perhaps signed.
func isIndex(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// pointerExists reports whether the RFC 6901 pointer p names a value in doc.
func pointerExists(doc any, p string) bool {
	if p == "" {
		return true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return false
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return false
			}
			doc = v[i]
		default:
			return false
		}
	}
	return true
}

func isEmptyObject(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}
