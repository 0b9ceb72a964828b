package mutate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//
// The diff is jsonpatch.CreatePatch's. The API server sends a pod in its
// typed encoding, so raw is most often exactly what encoding original
// gives: then only the parts of the pod that the core changed are diffed
// (typedPatch), which gives the same operations as a diff of the
// whole documents for a fraction of its cost.
func Patch(raw []byte, original, mutated *corev1.Pod) ([]jsonpatch.Operation, error) {
	ops, _, err := patch(raw, original, mutated, false)
	return ops, err
}

// PatchResult is Patch, and also what applying the patch to raw gives,
// when that is known without applying it: the encoding of mutated, when
// raw is, as a JSON value, the encoding of original and the patch is the
// whole diff of the two encodings (none of its operations dropped; mutated
// being what the core made of original, it differs from it only in the
// parts typedPatch diffs). The document applying the patch gives then
// equals it as a JSON value, its members perhaps in another order.
// Otherwise result is nil.
//
// Unlike Patch, PatchResult also diffs part by part a pod read from YAML or
// from kubectl's JSON, whose members come sorted, when it holds nothing the
// typed round trip drops or spells otherwise: that costs one more decode of
// the pod, which Patch, serving the API server's typed encoding, does not
// spend on a pod that is not in it.
func PatchResult(raw []byte, original, mutated *corev1.Pod) (ops []jsonpatch.Operation, result []byte, err error) {
	ops, exact, err := patch(raw, original, mutated, true)
	if err != nil || !exact {
		return ops, nil, err
	}
	if result, err = json.Marshal(mutated); err != nil {
		return nil, nil, fmt.Errorf("encoding mutated pod: %w", err)
	}
	return ops, result, nil
}

// patch is Patch; exact reports that the operations are the whole diff of
// the encodings of original and mutated, and that raw is, as a JSON value,
// the first (see isEncoding for sorted).
func patch(raw []byte, original, mutated *corev1.Pod, sorted bool) (ops []jsonpatch.Operation, exact bool, err error) {
	ops, typed, err := typedPatch(raw, original, mutated, sorted)
	if err != nil {
		return nil, false, err
	}
	if !typed {
		if ops, err = wholePatch(raw, mutated); err != nil {
			return nil, false, err
		}
	}
	n := len(ops)
	if ops, err = keepIntended(ops, original); err != nil {
		return nil, false, err
	}
	return ops, typed && len(ops) == n, nil
}

// MarshalPatch encodes ops as a JSONPatch document: what json.Marshal
// gives (jsonpatch.Operation's MarshalJSON: the value of an add or replace
// always written, null when nil), in one pass, where json.Marshal encodes
// each operation on its own and then reads all of them again.
func MarshalPatch(ops []jsonpatch.Operation) ([]byte, error) {
	type op struct {
		Operation string `json:"op"`
		Path      string `json:"path"`
		Value     any    `json:"value,omitempty"`
	}
	var out []op
	if ops != nil {
		out = make([]op, len(ops))
	}
	for i, o := range ops {
		out[i] = op{o.Operation, o.Path, o.Value}
		if o.Value == nil && (o.Operation == "add" || o.Operation == "replace") {
			out[i].Value = json.RawMessage("null")
		}
	}
	return json.Marshal(out)
}

// wholePatch is the diff of raw and the encoding of mutated, each without
// managedFields, as whole documents.
func wholePatch(raw []byte, mutated *corev1.Pod) ([]jsonpatch.Operation, error) {
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
	return ops, nil
}

// typedPatch is the diff wholePatch makes, when raw is the encoding of
// original (it reports false otherwise; see isEncoding for sorted): raw
// then holds nothing the typed round trip drops or respells, so the diff
// is that of the encodings of original and mutated, and it is taken part
// by part. The parts are the members the core writes (regions), and
// nothing else is compared: TestRegions checks, for the corpus and random
// pods under every corpus policy set, that the core changes a pod nowhere
// else, and TestPatchEqualsWholeDocumentDiff that the diff of the parts is
// that of the whole documents. A part equal in both typed pods
// (reflect.DeepEqual) has the same encoding and gives no operation; the
// others are diffed at their path: a string map by diffStrings, the rest
// encoded and diffed with jsonpatch.CreatePatch.
func typedPatch(raw []byte, original, mutated *corev1.Pod, sorted bool) ([]jsonpatch.Operation, bool, error) {
	if original.TypeMeta != mutated.TypeMeta || !isEncoding(raw, original, sorted) {
		return nil, false, nil
	}
	ops, err := diffStruct(nil, &original.ObjectMeta, &mutated.ObjectMeta, "/metadata", metadataParts)
	if err != nil {
		return nil, false, err
	}
	if ops, err = diffStruct(ops, &original.Spec, &mutated.Spec, "/spec", specParts); err != nil {
		return nil, false, err
	}
	return ops, true, nil
}

// isEncoding reports whether raw is the encoding of pod as a JSON value,
// which is what a diff of the whole documents reads of it: byte for byte
// (the API server's typed encoding), or, when sorted, once the encoding is
// written as json.Marshal writes generic values, members sorted, which is
// what sigs.k8s.io/yaml gives of a pod read from YAML, and dry-run of one
// read from JSON. Numbers compare as they are spelled, so 1.0 is not 1; a
// pod that differs only there takes the whole diff, which is still right.
func isEncoding(raw []byte, pod *corev1.Pod, sorted bool) bool {
	buf := encodeBuffers.Get().(*bytes.Buffer)
	defer putEncodeBuffer(buf)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(pod); err != nil {
		return false
	}
	enc := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if bytes.Equal(enc, raw) {
		return true
	}
	if !sorted {
		return false
	}
	d := json.NewDecoder(bytes.NewReader(enc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return false
	}
	canonical, err := json.Marshal(v)
	return err == nil && bytes.Equal(canonical, raw)
}

// encodeBuffers holds the buffers isEncoding encodes a pod into, which
// it compares and lets go: json.Marshal would copy each encoding into a
// new array of the pod's size.
var encodeBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer is the largest buffer encodeBuffers keeps, many times a
// sandbox pod's encoding: a pod near the caps leaves its buffer to the
// collector rather than holding its memory between reviews.
const maxPooledBuffer = 64 << 10

func putEncodeBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBuffer {
		encodeBuffers.Put(buf)
	}
}

// A part is a member of a struct that diffStruct diffs on its own: its
// field, its JSON name and, for an array of structs, the parts of each
// element.
type part struct {
	index []int
	name  string
	// omitEmpty: the member is left out of the encoding when the field is
	// empty as encoding/json sees it (see encoded).
	omitEmpty bool
	elem      []part
}

// parts describes the named fields of struct type T, their JSON names and
// omitempty read from their tags.
func parts[T any](fields ...string) []part {
	t := reflect.TypeFor[T]()
	out := make([]part, 0, len(fields))
	for _, name := range fields {
		f, ok := t.FieldByName(name)
		member, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !ok || member == "" || member == "-" {
			panic(fmt.Sprintf("mutate: %s has no field %s with a JSON name", t, name))
		}
		omit := slices.Contains(strings.Split(opts, ","), "omitempty")
		out = append(out, part{index: f.Index, name: member, omitEmpty: omit})
	}
	return out
}

func withElem(ps []part, elem []part) []part {
	for i := range ps {
		ps[i].elem = elem
	}
	return ps
}

// The members the core writes (the regions TestRegions checks): the
// annotations, where the status goes; the containers' image, resources,
// env and volume mounts, in every container list; the volumes, the pod's
// resources, its runtime class, node selector and tolerations.
var (
	metadataParts  = parts[metav1.ObjectMeta]("Annotations")
	containerParts = parts[corev1.Container]("Image", "Resources", "Env", "VolumeMounts")
	specParts      = slices.Concat(
		withElem(parts[corev1.PodSpec]("InitContainers", "Containers"), containerParts),
		withElem(parts[corev1.PodSpec]("EphemeralContainers"), parts[corev1.EphemeralContainer]("Image")),
		parts[corev1.PodSpec]("Volumes", "Resources", "RuntimeClassName", "NodeSelector", "Tolerations"),
	)
)

// diffStruct appends the diff of the parts ps of *o and *m, two values of
// one struct type, at path: a part both encodings hold is diffed (an array
// of structs element by element, when both hold elements), a part only
// one holds is added or removed.
func diffStruct(ops []jsonpatch.Operation, o, m any, path string, ps []part) ([]jsonpatch.Operation, error) {
	ov, mv := reflect.ValueOf(o).Elem(), reflect.ValueOf(m).Elem()
	var err error
	for _, p := range ps {
		of, mf := ov.FieldByIndex(p.index), mv.FieldByIndex(p.index)
		at := path + "/" + p.name
		switch inO, inM := encoded(of, p.omitEmpty), encoded(mf, p.omitEmpty); {
		case inO && inM && of.Kind() == reflect.Slice && of.Len() > 0 && mf.Len() > 0:
			ops, err = diffSlice(ops, of, mf, at, p.elem)
		case inO && inM && of.Type() == stringMap:
			ops = diffStrings(ops, of.Interface().(map[string]string), mf.Interface().(map[string]string), at)
		case inO && inM:
			ops, err = diffEncoded(ops, of.Addr().Interface(), mf.Addr().Interface(), at)
		case inM:
			ops, err = addEncoded(ops, mf.Addr().Interface(), at)
		case inO:
			ops = append(ops, jsonpatch.NewOperation("remove", at, nil))
		}
		if err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// addEncoded appends the addition of the encoding of v at path. The value
// is that encoding as it stands, the members of an object in the order of
// its type's fields: the same JSON as CreatePatch's value, whose members
// are sorted, without decoding it to reorder them.
func addEncoded(ops []jsonpatch.Operation, v any, path string) ([]jsonpatch.Operation, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding mutated pod: %w", err)
	}
	return append(ops, jsonpatch.NewOperation("add", path, json.RawMessage(b))), nil
}

// diffSlice appends the diff of two arrays as CreatePatch makes it: the
// elements beyond the shorter one removed or added, and those at the same
// index diffed (by the parts elem, when given).
func diffSlice(ops []jsonpatch.Operation, o, m reflect.Value, path string, elem []part) ([]jsonpatch.Operation, error) {
	n := min(o.Len(), m.Len())
	for i := o.Len() - 1; i >= n; i-- {
		ops = append(ops, jsonpatch.NewOperation("remove", path+"/"+strconv.Itoa(i), nil))
	}
	var err error
	for i := n; i < m.Len(); i++ {
		if ops, err = addEncoded(ops, m.Index(i).Addr().Interface(), path+"/"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	// Most often the core appends to such an array and changes none of
	// the elements it had: one comparison of those then replaces one per
	// element.
	if elem == nil && n > 1 && reflect.DeepEqual(o.Slice(0, n).Interface(), m.Slice(0, n).Interface()) {
		return ops, nil
	}
	for i := range n {
		oe, me := o.Index(i).Addr().Interface(), m.Index(i).Addr().Interface()
		at := path + "/" + strconv.Itoa(i)
		if elem == nil {
			ops, err = diffEncoded(ops, oe, me, at)
		} else {
			ops, err = diffStruct(ops, oe, me, at, elem)
		}
		if err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// diffEncoded appends CreatePatch's diff of the encodings of o and m, at
// path, unless they are deeply equal.
func diffEncoded(ops []jsonpatch.Operation, o, m any, path string) ([]jsonpatch.Operation, error) {
	if reflect.DeepEqual(o, m) {
		return ops, nil
	}
	a, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encoding original pod: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding mutated pod: %w", err)
	}
	sub, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("computing patch: %w", err)
	}
	for _, op := range sub {
		op.Path = path + op.Path
		ops = append(ops, op)
	}
	return ops, nil
}

var stringMap = reflect.TypeFor[map[string]string]()

// diffStrings appends the diff CreatePatch makes of two objects whose
// members are strings (annotations, a node selector), at path: a member
// only m has is added, one only o has removed, and one whose value changed
// replaced, each named by its key escaped as RFC 6901 says. CreatePatch
// would encode both maps and decode them again to find that; for the
// annotations, where every mutated pod's status goes, that was a tenth of
// the typed patch's time.
func diffStrings(ops []jsonpatch.Operation, o, m map[string]string, path string) []jsonpatch.Operation {
	op := func(kind, k string, v any) jsonpatch.Operation {
		return jsonpatch.NewOperation(kind, path+"/"+pointerToken.Replace(k), v)
	}
	for k, v := range m {
		switch was, ok := o[k]; {
		case !ok:
			ops = append(ops, op("add", k, v))
		case was != v:
			ops = append(ops, op("replace", k, v))
		}
	}
	for k := range o {
		if _, ok := m[k]; !ok {
			ops = append(ops, op("remove", k, nil))
		}
	}
	return ops
}

// pointerToken escapes a key as a token of a JSON pointer (RFC 6901).
var pointerToken = strings.NewReplacer("~", "~0", "/", "~1")

// encoded reports whether a field is a member of its struct's encoding:
// always, unless omitEmpty and it is empty as encoding/json sees it (false,
// 0, "", a nil pointer, an empty array or map; a struct never is).
func encoded(v reflect.Value, omitEmpty bool) bool {
	if !omitEmpty {
		return true
	}
	switch v.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Map, reflect.String:
		return v.Len() > 0
	default:
		return !v.IsZero()
	}
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
	switch v := v.(type) {
	case map[string]any:
		return len(v) == 0
	case json.RawMessage:
		return string(v) == "{}"
	}
	return false
}
