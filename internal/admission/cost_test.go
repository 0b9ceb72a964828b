package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// costShape is one review of the cost test: a pod in which one array or map
// is filled with many of its smallest elements.
type costShape struct {
	name string
	op   admissionv1.Operation
	// sub is the request's subresource; old, the old object.
	sub      string
	raw, old []byte
}

// podArrays lists every array and map a Pod has, to the depth given, as
// JSON paths from the pod (a "[]" step is one element of an array) and the
// smallest element of each as JSON: {} for an object, "" for a string, 0 for
// a number; a map's element is a member.
func podArrays(maxDepth int) (paths [][]string, elems []string) {
	var walk func(t reflect.Type, path []string, depth int)
	walk = func(t reflect.Type, path []string, depth int) {
		if depth > maxDepth {
			return
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Slice:
			if t.Elem().Kind() == reflect.Uint8 {
				return // []byte: a base64 string
			}
			paths = append(paths, slices.Clone(path))
			elems = append(elems, smallest(t.Elem()))
			walk(t.Elem(), append(path, "[]"), depth+1)
		case reflect.Map:
			paths = append(paths, slices.Clone(path))
			elems = append(elems, `"k%d":`+smallest(t.Elem()))
		case reflect.Struct:
			if t == reflect.TypeFor[resource.Quantity]() {
				return
			}
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "-" || !f.IsExported() {
					continue
				}
				if name == "" { // inline
					walk(f.Type, path, depth)
					continue
				}
				walk(f.Type, append(slices.Clone(path), name), depth+1)
			}
		}
	}
	walk(reflect.TypeFor[corev1.Pod](), nil, 0)
	return paths, elems
}

func smallest(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[resource.Quantity]():
		return `"1"`
	case t.Kind() == reflect.String:
		return `""`
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		return `{}`
	case t.Kind() == reflect.Slice:
		return `[]`
	case t.Kind() == reflect.Bool:
		return `false`
	default:
		return `0`
	}
}

// fill returns a pod of the sandbox label whose path holds n elements.
func fill(path []string, elem string, n int) []byte {
	var inner bytes.Buffer
	isMap := strings.HasPrefix(elem, `"k%d":`)
	if isMap {
		inner.WriteByte('{')
	} else {
		inner.WriteByte('[')
	}
	for i := range n {
		if i > 0 {
			inner.WriteByte(',')
		}
		if isMap {
			fmt.Fprintf(&inner, elem, i)
		} else {
			inner.WriteString(elem)
		}
	}
	if isMap {
		inner.WriteByte('}')
	} else {
		inner.WriteByte(']')
	}
	v := inner.String()
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == "[]" {
			v = "[" + v + "]"
		} else {
			v = fmt.Sprintf(`{%q:%s}`, path[i], v)
		}
	}
	// The pod around it: the metadata and a container the policies need,
	// merged under the path's first key.
	pod := map[string]json.RawMessage{}
	_ = json.Unmarshal([]byte(v), &pod)
	base := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "sandboxes", "labels": map[string]string{"app": "sandbox"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "task", "image": "i"}}},
	}
	out, _ := json.Marshal(base)
	for k, raw := range pod {
		out = mergeKey(out, k, raw)
	}
	return out
}

// mergeKey merges raw into doc's member k, object into object, the first
// element of an array into the first element.
func mergeKey(doc []byte, k string, raw json.RawMessage) []byte {
	var d map[string]any
	_ = json.Unmarshal(doc, &d)
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&v)
	d[k] = merge(d[k], v)
	out, _ := json.Marshal(d)
	return out
}

func merge(a, b any) any {
	switch bv := b.(type) {
	case map[string]any:
		if av, ok := a.(map[string]any); ok {
			for k, v := range bv {
				av[k] = merge(av[k], v)
			}
			return av
		}
	case []any:
		if av, ok := a.([]any); ok && len(av) == 1 && len(bv) == 1 {
			return []any{merge(av[0], bv[0])}
		}
	}
	return b
}

// allocated returns the bytes the heap allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPriceBoundsAllocation: for every array and map of a pod (to a
// depth of five fields), a review whose pod holds tens of thousands of its
// smallest elements (and, in an array of structs, of nulls and of zeros),
// and for long strings, deep nesting, unknown fields,
// statuses and the corpus pods, what answering it allocates (every byte,
// garbage included, so more than it ever holds at once) stays within what
// the count reserves for it besides its body. That is what keeps the
// server's memory within its request budget whatever a client sends.
func TestPriceBoundsAllocation(t *testing.T) {
	f := newFixture(t, memoryPolicies(t), mutate.Options{})
	const target = 48 << 10 // bytes of elements per shape
	var shapes []costShape
	paths, elems := podArrays(5)
	for i, p := range paths {
		size := len(elems[i])
		if strings.Contains(elems[i], "%d") {
			size = len(fmt.Sprintf(elems[i], 99999))
		}
		n := target / (size + 1)
		switch p[len(p)-1] {
		case "containers", "initContainers", "ephemeralContainers":
			n = MaxContainers - 2
		case "volumes":
			n = MaxVolumes
		case "env", "envFrom":
			n = MaxEnv / 2
		case "volumeMounts", "volumeDevices":
			n = MaxMounts / 2
		}
		shapes = append(shapes, costShape{name: strings.Join(p, "."), op: admissionv1.Create,
			raw: fill(p, elems[i], n)})
		if elems[i] == `{}` {
			// What the decoder makes a zero struct of (null), or grows
			// the slice for before it refuses the type (0).
			for _, e := range []string{`null`, `0`} {
				shapes = append(shapes, costShape{name: strings.Join(p, ".") + " of " + e, op: admissionv1.Create,
					raw: fill(p, e, n)})
			}
		}
	}
	long := strings.Repeat("x", 256<<10)
	shapes = append(shapes,
		costShape{name: "long annotation", op: admissionv1.Create,
			raw: fill([]string{"metadata", "annotations"}, `"k%d":"`+long+`"`, 1)},
		costShape{name: "long env value", op: admissionv1.Create,
			raw: fill([]string{"spec", "containers", "[]", "env"}, `{"name":"A","value":"`+long+`"}`, 1)},
		costShape{name: "long escaped args", op: admissionv1.Create,
			raw: fill([]string{"spec", "containers", "[]", "args"}, `"`+strings.Repeat(`\u00e9`, 32<<10)+`"`, 1)},
		costShape{name: "deep unknown field", op: admissionv1.Create,
			raw: fill([]string{"spec", "x"}, strings.Repeat("[", 9000)+strings.Repeat("]", 9000), 1)},
		costShape{name: "unknown fields", op: admissionv1.Create,
			raw: fill([]string{"spec", "x"}, `{"k%d":[{}]}`, 8000)},
		// fieldsV1 is kept as raw bytes and left out of the patch's diff:
		// priced as its bytes, however many objects it spells.
		costShape{name: "managedFields of 8,000 env entries", op: admissionv1.Create,
			raw: fill([]string{"metadata", "managedFields"}, envFields(8000), 1)},
		costShape{name: "managedFields of empty objects", op: admissionv1.Create,
			raw: fill([]string{"metadata", "managedFields", "[]", "fieldsV1"}, `"k%d":{}`, 16000)},
		costShape{name: "ephemeral update", op: admissionv1.Update, sub: "ephemeralcontainers",
			raw: fill([]string{"spec", "tolerations"}, `{}`, 8000),
			old: fill([]string{"spec", "topologySpreadConstraints"}, `{}`, 8000)},
		costShape{name: "ephemeral update, status", op: admissionv1.Update, sub: "ephemeralcontainers",
			raw: fill([]string{"status", "conditions"}, `{}`, 16000),
			old: fill([]string{"status", "containerStatuses"}, `{}`, 16000)},
	)
	for _, name := range []string{"basic", "init-and-sidecar", "many-containers", "memory-emptydirs", "limit-above-headroom"} {
		shapes = append(shapes, costShape{name: "corpus " + name, op: admissionv1.Create, raw: podJSON(t, name)})
	}

	worst, worstName := 0.0, ""
	for _, sh := range shapes {
		req := newRequest(sh.op, "sandboxes", sh.raw)
		req.SubResource = sh.sub
		if sh.old != nil {
			req.OldObject.Raw = sh.old
		}
		body := reviewBody(t, req)
		price := PriceReview(slices.Clone(body))
		var code int
		var answer string
		got := allocated(func() {
			r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			f.http.ServeHTTP(w, r)
			code = w.Code
			answer = w.Body.String()
		})
		if code != http.StatusOK || !strings.Contains(answer, `"response"`) {
			t.Errorf("%s: HTTP %d %.200s", sh.name, code, answer)
		}
		// The request and the recorder take a few KiB of their own.
		ratio := float64(got) / (float64(price.Memory()+16<<10) * allocSlack)
		if ratio > worst {
			worst, worstName = ratio, sh.name
		}
		if testing.Verbose() || ratio > 1 {
			t.Logf("%-70s %s: allocated %9d, reserved %9d (%.2f) %s", sh.name, price,
				got, price.Memory(), ratio, strings.TrimSpace(answerOutcome(answer)))
		}
		if ratio > 1 {
			t.Errorf("%s: answering allocated %d bytes, more than the %d the count reserves (times %.2f in this build)", sh.name, got, price.Memory(), allocSlack)
		}
	}
	t.Logf("%d shapes; the highest share of the reservation allocated: %.2f (%s)", len(shapes), worst, worstName)
}

// envFields is a managedFields entry as the API server writes it for a
// container with n env entries: four objects per entry in its fieldsV1.
func envFields(n int) string {
	var b strings.Builder
	b.WriteString(`{"manager":"kubectl","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"task\"}":{".":{},"f:env":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k:{\"name\":\"E%d\"}":{".":{},"f:name":{},"f:value":{}}`, i)
	}
	b.WriteString(`}}}}}}`)
	return b.String()
}

func answerOutcome(answer string) string {
	var review admissionv1.AdmissionReview
	if json.Unmarshal([]byte(answer), &review) != nil || review.Response == nil {
		return ""
	}
	r := review.Response
	out := fmt.Sprintf("allowed=%v patch=%d", r.Allowed, len(r.Patch))
	if r.Result != nil {
		out += fmt.Sprintf(" code=%d %.60s", r.Result.Code, r.Result.Message)
	}
	return out
}
