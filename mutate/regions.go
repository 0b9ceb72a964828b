package mutate

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// The core changes a pod only in these places, its regions:
//
//   - metadata.annotations (the status annotation);
//   - spec.volumes (volumes appended; an emptyDir's medium cleared);
//   - spec.resources (the pod-level memory);
//   - in every init container and container: env (appended, or one
//     replaced), volumeMounts (appended) and resources (memory).
//
// writable copies exactly these, so the core can write them without touching
// its input, and regionPatch compares exactly these, so the patch is built
// from what the policies changed instead of diffing whole documents. A new
// place the core writes must be added to both; TestRegions checks that they
// cover everything the corpus and random pods exercise.

// writable returns a shallow copy of pod whose regions are copies the core
// may change; every other part is shared with pod and must not be written.
func writable(pod *corev1.Pod) *corev1.Pod {
	out := *pod
	out.Annotations = maps.Clone(pod.Annotations)
	out.Spec.Volumes = slices.Clone(pod.Spec.Volumes)
	out.Spec.Resources = pod.Spec.Resources.DeepCopy() // nil stays nil
	out.Spec.InitContainers = writableContainers(pod.Spec.InitContainers)
	out.Spec.Containers = writableContainers(pod.Spec.Containers)
	return &out
}

func writableContainers(cs []corev1.Container) []corev1.Container {
	out := slices.Clone(cs) // nil stays nil
	for i := range out {
		c := &out[i]
		c.Env = slices.Clone(c.Env)
		c.VolumeMounts = slices.Clone(c.VolumeMounts)
		c.Resources.Limits = maps.Clone(c.Resources.Limits)
		c.Resources.Requests = maps.Clone(c.Resources.Requests)
	}
	return out
}

// regionPatch returns the JSONPatch that turns the typed encoding of
// original into that of mutated, given that they differ only in the
// regions. Its operations are those the generic diff (gomodules jsonpatch,
// as diffPatch uses it) makes of the two documents, found without encoding
// or decoding either: each region is compared typed, and only an element
// that differs is encoded and diffed on its own. ok is false when the pods
// differ in shape (another number of containers), which the core never does.
func regionPatch(original, mutated *corev1.Pod) (ops []jsonpatch.Operation, ok bool, err error) {
	if len(original.Spec.Containers) != len(mutated.Spec.Containers) ||
		len(original.Spec.InitContainers) != len(mutated.Spec.InitContainers) {
		return nil, false, nil
	}
	d := &differ{}
	d.stringMap("/metadata/annotations", original.Annotations, mutated.Annotations)
	diffSlice(d, "/spec/volumes", original.Spec.Volumes, mutated.Spec.Volumes, deepEqual)
	d.optional("/spec/resources", original.Spec.Resources != nil, mutated.Spec.Resources != nil,
		original.Spec.Resources, mutated.Spec.Resources)
	for _, cs := range []struct {
		path string
		o, m []corev1.Container
	}{
		{"/spec/initContainers/", original.Spec.InitContainers, mutated.Spec.InitContainers},
		{"/spec/containers/", original.Spec.Containers, mutated.Spec.Containers},
	} {
		for i := range cs.o {
			o, m := &cs.o[i], &cs.m[i]
			p := cs.path + strconv.Itoa(i)
			diffSlice(d, p+"/env", o.Env, m.Env, sameEnv)
			diffSlice(d, p+"/volumeMounts", o.VolumeMounts, m.VolumeMounts, deepEqual)
			// resources is a struct: always encoded, {} when empty.
			if !reflect.DeepEqual(o.Resources, m.Resources) {
				d.sub(p+"/resources", &o.Resources, &m.Resources)
			}
		}
	}
	if d.err != nil {
		return nil, false, d.err
	}
	return d.ops, true, nil
}

// differ collects the operations of regionPatch.
type differ struct {
	ops []jsonpatch.Operation
	err error
}

// add adds the value v at path; like diffPatch, it leaves out empty
// objects, which only a typed encoding introduces.
func (d *differ) add(path string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		d.fail(err)
		return
	}
	if string(b) == "{}" {
		return
	}
	d.ops = append(d.ops, jsonpatch.Operation{Operation: "add", Path: path, Value: json.RawMessage(b)})
}

func (d *differ) remove(path string) {
	d.ops = append(d.ops, jsonpatch.Operation{Operation: "remove", Path: path})
}

// sub appends the generic diff of the encodings of o and m under path.
func (d *differ) sub(path string, o, m any) {
	a, err := json.Marshal(o)
	if err != nil {
		d.fail(err)
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		d.fail(err)
		return
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		d.fail(err)
		return
	}
	for _, op := range ops {
		if op.Operation == "add" && isEmptyObject(op.Value) {
			continue
		}
		op.Path = path + op.Path
		d.ops = append(d.ops, op)
	}
}

func (d *differ) fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("computing the patch: %w", err)
	}
}

// optional diffs a field encoded only when present (omitempty).
func (d *differ) optional(path string, oPresent, mPresent bool, o, m any) {
	switch {
	case !oPresent && !mPresent:
	case !oPresent:
		d.add(path, m)
	case !mPresent:
		d.remove(path)
	case !reflect.DeepEqual(o, m):
		d.sub(path, o, m)
	}
}

// stringMap diffs a map[string]string field with omitempty.
func (d *differ) stringMap(path string, o, m map[string]string) {
	if len(o) == 0 || len(m) == 0 {
		d.optional(path, len(o) > 0, len(m) > 0, o, m)
		return
	}
	for k, v := range m {
		p := path + "/" + rfc6901.Replace(k)
		if ov, ok := o[k]; !ok {
			d.ops = append(d.ops, jsonpatch.Operation{Operation: "add", Path: p, Value: v})
		} else if ov != v {
			d.ops = append(d.ops, jsonpatch.Operation{Operation: "replace", Path: p, Value: v})
		}
	}
	for k := range o {
		if _, ok := m[k]; !ok {
			d.remove(path + "/" + rfc6901.Replace(k))
		}
	}
}

// diffSlice diffs a slice field with omitempty the way the generic diff
// treats arrays: the surplus of the original removed from its end, the
// surplus of the mutated added, and the elements in common diffed one by
// one. Elements are compared typed first: only those equal does not vouch
// for are encoded.
func diffSlice[T any](d *differ, path string, o, m []T, equal func(a, b *T) bool) {
	if len(o) == 0 || len(m) == 0 {
		d.optional(path, len(o) > 0, len(m) > 0, o, m)
		return
	}
	n := min(len(o), len(m))
	for i := len(o) - 1; i >= n; i-- {
		d.remove(path + "/" + strconv.Itoa(i))
	}
	for i := n; i < len(m); i++ {
		d.add(path+"/"+strconv.Itoa(i), &m[i])
	}
	for i := range n {
		if !equal(&o[i], &m[i]) {
			d.sub(path+"/"+strconv.Itoa(i), &o[i], &m[i])
		}
	}
}

func deepEqual[T any](a, b *T) bool { return reflect.DeepEqual(a, b) }

// sameEnv is deepEqual, at once when the two share their valueFrom (the
// env vars writable copied and the core did not replace).
func sameEnv(a, b *corev1.EnvVar) bool { return *a == *b || reflect.DeepEqual(a, b) }
