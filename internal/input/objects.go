package input

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Object is one input object, as JSON, and the pod it carries: a Pod, a
// workload with a pod template, or anything else (passed through
// untouched).
type Object struct {
	// JSON is the object; in a List, an item may be any JSON value.
	JSON []byte
	Kind string
	// Name, GenerateName and Namespace are the object's metadata.
	Name, GenerateName, Namespace string
	// Pod is the pod to mutate, as JSON: the object itself for a Pod, a
	// Pod of the template's metadata and spec for a workload; nil for an
	// object without one.
	Pod []byte
	// TemplatePath is the JSON pointer of the pod template inside the
	// object, "" for a Pod.
	TemplatePath string
	// fields are the object's members, undecoded; nil for a value that is
	// not an object.
	fields map[string]json.RawMessage
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

// Classify reads the kind, the metadata and the pod of the JSON value js.
// Members of an unexpected type (a kind that is not a string, a template
// that is not an object) count as absent, as with kubectl.
func Classify(js []byte) Object {
	o := Object{JSON: js}
	if json.Unmarshal(js, &o.fields) != nil || o.fields == nil {
		o.fields = nil
		return o
	}
	o.Kind = stringMember(o.fields, "kind")
	var md map[string]json.RawMessage
	_ = json.Unmarshal(o.fields["metadata"], &md)
	o.Name, o.GenerateName, o.Namespace = stringMember(md, "name"), stringMember(md, "generateName"), stringMember(md, "namespace")
	if o.Kind == "Pod" {
		o.Pod = js
		return o
	}
	path, ok := TemplatePaths[o.Kind]
	if !ok {
		return o
	}
	cur := o.fields
	for _, k := range path {
		var next map[string]json.RawMessage
		if json.Unmarshal(cur[k], &next) != nil || next == nil {
			return o
		}
		cur = next
	}
	pod := map[string]json.RawMessage{"apiVersion": json.RawMessage(`"v1"`), "kind": json.RawMessage(`"Pod"`)}
	for _, k := range []string{"metadata", "spec"} {
		if v, ok := cur[k]; ok {
			pod[k] = v
		}
	}
	if b, err := json.Marshal(pod); err == nil {
		o.Pod = b
		o.TemplatePath = "/" + strings.Join(path, "/")
	}
	return o
}

// stringMember returns the member k of m when it is a string.
func stringMember(m map[string]json.RawMessage, k string) string {
	var s string
	_ = json.Unmarshal(m[k], &s)
	return s
}

// IsObject reports whether the value is an object.
func (o Object) IsObject() bool { return o.fields != nil }

// IsList reports whether the object is a List (v1 List or a typed FooList).
func (o Object) IsList() bool {
	items := o.fields["items"]
	return strings.HasSuffix(o.Kind, "List") && len(items) > 0 && items[0] == '['
}

// Items returns the items of a List.
func (o Object) Items() []json.RawMessage {
	var items []json.RawMessage
	_ = json.Unmarshal(o.fields["items"], &items)
	return items
}

// HasPod reports whether the object carries a pod or a pod template.
func (o Object) HasPod() bool { return o.Pod != nil }

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
func (o Object) DisplayName(namespace string) string {
	name := o.Name
	if name == "" && o.GenerateName != "" {
		name = o.GenerateName + "(generated)"
	}
	if namespace != "" {
		return fmt.Sprintf("%s %s/%s", o.Kind, namespace, name)
	}
	return fmt.Sprintf("%s %s", o.Kind, name)
}
