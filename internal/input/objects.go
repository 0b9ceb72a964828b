package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// Object is one input document: a pod, a workload with a pod template, or
// anything else (passed through untouched).
type Object struct {
	Doc map[string]any
	// Template is the pod template inside Doc (nil for a Pod and for
	// objects without one).
	Template map[string]any
	// TemplatePath is the JSON pointer of Template inside Doc, "" for a Pod.
	TemplatePath string
	IsPod        bool
}

// TemplatePaths maps workload kinds to where their pod template lives.
var TemplatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
	"PodTemplate":           {"template"},
}

// IsList reports whether doc is a List (v1 List or a typed FooList).
func IsList(doc map[string]any) bool {
	kind, _ := doc["kind"].(string)
	_, hasItems := doc["items"].([]any)
	return hasItems && strings.HasSuffix(kind, "List")
}

// Classify finds the pod in doc, if any.
func Classify(doc map[string]any) Object {
	o := Object{Doc: doc}
	kind, _ := doc["kind"].(string)
	if kind == "Pod" {
		o.IsPod = true
		return o
	}
	p, ok := TemplatePaths[kind]
	if !ok {
		return o
	}
	var cur any = doc
	for _, k := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return o
		}
		cur = m[k]
	}
	if m, ok := cur.(map[string]any); ok {
		o.Template = m
		o.TemplatePath = "/" + strings.Join(p, "/")
	}
	return o
}

// HasPod reports whether the object carries a pod or a pod template.
func (o Object) HasPod() bool { return o.IsPod || o.Template != nil }

// PodValue returns the pod to mutate: the object itself for a Pod, a Pod
// built from metadata and spec of the template for a workload.
func (o Object) PodValue() map[string]any {
	if o.IsPod {
		return o.Doc
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod"}
	if md, ok := o.Template["metadata"]; ok {
		pod["metadata"] = md
	}
	if spec, ok := o.Template["spec"]; ok {
		pod["spec"] = spec
	}
	return pod
}

// PodJSON returns PodValue as JSON.
func (o Object) PodJSON() ([]byte, error) {
	return json.Marshal(o.PodValue())
}

// PatchBase returns what mutate.Patch is to diff the mutated pod against:
// the typed encoding of pod when it holds exactly what raw holds, else raw.
// The apiserver encodes every pod it stores that way, so a kubectl get
// dump's pods differ from it only in the order of their keys, which the
// generic diff does not see; with the typed encoding, Patch builds the same
// operations from the regions the core changed instead of decoding and
// diffing both whole documents. A pod without a status counts as one with
// an empty status: the diff drops the addition of an empty object.
//
// typed reports which it returns, for mutate.PatchEncoded: raw itself is
// never the typed encoding when the typed encoding does not hold what raw
// holds, so Patch need not encode pod a second time to find out.
func (o Object) PatchBase(raw []byte, pod *corev1.Pod) (base []byte, typed bool) {
	enc, err := json.Marshal(pod)
	if err != nil {
		return raw, false
	}
	if rest, ok := matchJSON(enc, o.PodValue(), true); !ok || len(rest) != 0 {
		return raw, false
	}
	return enc, true
}

// matchJSON reports whether the JSON value at the start of b, as
// encoding/json writes it (no spaces), equals v, a value as encoding/json
// decodes it, and returns what follows the value. It reads b without
// decoding it. At the top (top is true) an empty "status" object matches
// an absent status.
func matchJSON(b []byte, v any, top bool) (rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, false
	}
	switch b[0] {
	case '{':
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		seen, first := 0, true
		for b = b[1:]; len(b) > 0 && b[0] != '}'; first = false {
			if !first {
				if b, ok = bytes.CutPrefix(b, []byte(",")); !ok {
					return nil, false
				}
			}
			var key string
			if key, b, ok = jsonString(b); !ok || len(b) == 0 || b[0] != ':' {
				return nil, false
			}
			b = b[1:]
			val, has := m[key]
			switch {
			case has:
				if b, ok = matchJSON(b, val, false); !ok {
					return nil, false
				}
				seen++
			case top && key == "status" && bytes.HasPrefix(b, []byte("{}")):
				b = b[2:]
			default:
				return nil, false
			}
		}
		if len(b) == 0 || seen != len(m) {
			return nil, false
		}
		return b[1:], true
	case '[':
		a, isSlice := v.([]any)
		if !isSlice {
			return nil, false
		}
		i := 0
		for b = b[1:]; len(b) > 0 && b[0] != ']'; i++ {
			if i > 0 {
				if b, ok = bytes.CutPrefix(b, []byte(",")); !ok {
					return nil, false
				}
			}
			if i >= len(a) {
				return nil, false
			}
			if b, ok = matchJSON(b, a[i], false); !ok {
				return nil, false
			}
		}
		if len(b) == 0 || i != len(a) {
			return nil, false
		}
		return b[1:], true
	case '"':
		s, rest, ok := jsonString(b)
		want, isString := v.(string)
		return rest, ok && isString && s == want
	case 't':
		rest, ok = bytes.CutPrefix(b, []byte("true"))
		return rest, ok && v == true
	case 'f':
		rest, ok = bytes.CutPrefix(b, []byte("false"))
		return rest, ok && v == false
	case 'n':
		rest, ok = bytes.CutPrefix(b, []byte("null"))
		return rest, ok && v == nil
	}
	n := 0
	for n < len(b) && (b[n] >= '0' && b[n] <= '9' || b[n] == '-' || b[n] == '+' || b[n] == '.' || b[n] == 'e' || b[n] == 'E') {
		n++
	}
	f, err := strconv.ParseFloat(string(b[:n]), 64)
	want, isNumber := v.(float64)
	return b[n:], n > 0 && err == nil && isNumber && f == want
}

// jsonString reads the JSON string at the start of b.
func jsonString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	escaped := false
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if !escaped {
				return string(b[1:i]), b[i+1:], true
			}
			if json.Unmarshal(b[:i+1], &s) != nil {
				return "", nil, false
			}
			return s, b[i+1:], true
		}
	}
	return "", nil, false
}

// GenericOps returns ops with their values as encoding/json decodes them,
// so they are written with their keys sorted as the diff of patchBase's
// raw writes them: the patch dry-run prints does not depend on which of
// the two ways mutate.Patch built it.
func GenericOps(ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	b, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	var out []jsonpatch.Operation
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// PodMap returns the map the pod's JSONPatch applies to: the object itself
// for a Pod, the template (its metadata and spec) for a workload.
func (o Object) PodMap() map[string]any {
	if o.IsPod {
		return o.Doc
	}
	return o.Template
}

// FieldPath rewrites a strict decoding error of the pod (unknown field
// "spec.x") to name the field inside the object (unknown field
// "spec.template.spec.x" in a Deployment).
func (o Object) FieldPath(msg string) string {
	if o.TemplatePath == "" {
		return msg
	}
	prefix := strings.ReplaceAll(strings.TrimPrefix(o.TemplatePath, "/"), "/", ".") + "."
	if i := strings.Index(msg, `"`); i >= 0 {
		return msg[:i+1] + prefix + msg[i+1:]
	}
	return msg
}

// DisplayName is "Kind namespace/name" for reports.
func DisplayName(doc map[string]any, namespace string) string {
	kind, _ := doc["kind"].(string)
	md, _ := doc["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if name == "" {
		if g, _ := md["generateName"].(string); g != "" {
			name = g + "(generated)"
		}
	}
	if namespace != "" {
		return fmt.Sprintf("%s %s/%s", kind, namespace, name)
	}
	return fmt.Sprintf("%s %s", kind, name)
}
