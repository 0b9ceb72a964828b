package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// object is one input document: a pod, a workload with a pod template, or
// anything else (passed through untouched).
type object struct {
	doc map[string]any
	// tmpl is the pod template inside doc (nil for a Pod and for objects
	// without one).
	tmpl map[string]any
	// templatePath is the JSON pointer of tmpl inside doc, "" for a Pod.
	templatePath string
	isPod        bool
}

// templatePaths maps workload kinds to where their pod template lives.
var templatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
	"PodTemplate":           {"template"},
}

// isList reports whether doc is a List (v1 List or a typed FooList).
func isList(doc map[string]any) bool {
	kind, _ := doc["kind"].(string)
	_, hasItems := doc["items"].([]any)
	return hasItems && strings.HasSuffix(kind, "List")
}

// classify finds the pod in doc, if any.
func classify(doc map[string]any) object {
	o := object{doc: doc}
	kind, _ := doc["kind"].(string)
	if kind == "Pod" {
		o.isPod = true
		return o
	}
	p, ok := templatePaths[kind]
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
		o.tmpl = m
		o.templatePath = "/" + strings.Join(p, "/")
	}
	return o
}

// hasPod reports whether the object carries a pod or a pod template.
func (o object) hasPod() bool { return o.isPod || o.tmpl != nil }

// podValue returns the pod to mutate: the object itself for a Pod, a Pod
// built from metadata and spec of the template for a workload.
func (o object) podValue() map[string]any {
	if o.isPod {
		return o.doc
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod"}
	if md, ok := o.tmpl["metadata"]; ok {
		pod["metadata"] = md
	}
	if spec, ok := o.tmpl["spec"]; ok {
		pod["spec"] = spec
	}
	return pod
}

// podJSON returns podValue as JSON.
func (o object) podJSON() ([]byte, error) {
	return json.Marshal(o.podValue())
}

// patchBase returns what mutate.Patch is to diff the mutated pod against:
// the typed encoding of pod when it holds exactly what raw holds, else raw.
// The apiserver encodes every pod it stores that way, so a kubectl get
// dump's pods differ from it only in the order of their keys, which the
// generic diff does not see; with the typed encoding, Patch builds the same
// operations from the regions the core changed instead of decoding and
// diffing both whole documents. A pod without a status counts as one with
// an empty status: the diff drops the addition of an empty object.
func (o object) patchBase(raw []byte, pod *corev1.Pod) []byte {
	typed, err := json.Marshal(pod)
	if err != nil {
		return raw
	}
	var v map[string]any
	if json.Unmarshal(typed, &v) != nil {
		return raw
	}
	want := o.podValue()
	if st, ok := v["status"].(map[string]any); ok && len(st) == 0 {
		if _, has := want["status"]; !has {
			delete(v, "status")
		}
	}
	if !jsonEqual(v, want) {
		return raw
	}
	return typed
}

// genericOps returns ops with their values as encoding/json decodes them,
// so they are written with their keys sorted as the diff of patchBase's
// raw writes them: the patch dry-run prints does not depend on which of
// the two ways mutate.Patch built it.
func genericOps(ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
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

// jsonEqual reports whether two values as encoding/json decodes them are
// equal.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

// podMap returns the map the pod's JSONPatch applies to: the object itself
// for a Pod, the template (its metadata and spec) for a workload.
func (o object) podMap() map[string]any {
	if o.isPod {
		return o.doc
	}
	return o.tmpl
}

// fieldPath rewrites a strict decoding error of the pod (unknown field
// "spec.x") to name the field inside the object (unknown field
// "spec.template.spec.x" in a Deployment).
func (o object) fieldPath(msg string) string {
	if o.templatePath == "" {
		return msg
	}
	prefix := strings.ReplaceAll(strings.TrimPrefix(o.templatePath, "/"), "/", ".") + "."
	if i := strings.Index(msg, `"`); i >= 0 {
		return msg[:i+1] + prefix + msg[i+1:]
	}
	return msg
}

// displayName is "Kind namespace/name" for reports.
func displayName(doc map[string]any, namespace string) string {
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
