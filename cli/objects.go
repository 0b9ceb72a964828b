package cli

import (
	"encoding/json"
	"fmt"
	"strings"
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

// podJSON returns the pod to mutate, as JSON: the object itself for a Pod, a
// Pod built from metadata and spec of the template for a workload.
func (o object) podJSON() ([]byte, error) {
	if o.isPod {
		return json.Marshal(o.doc)
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod"}
	if md, ok := o.tmpl["metadata"]; ok {
		pod["metadata"] = md
	}
	if spec, ok := o.tmpl["spec"]; ok {
		pod["spec"] = spec
	}
	return json.Marshal(pod)
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
