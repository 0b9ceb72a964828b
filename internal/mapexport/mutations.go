package mapexport

import (
	"fmt"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// mutations adds the block's mutation: one JSONPatch whose every decision is
// taken on the pod as it arrived, as the webhook takes it. It appends what is
// missing (volumes, mounts, env, after the pod's own entries, in the
// webhook's order), sets the memory and the status annotation, replaces a
// pod's own env var (onConflict: override, which drops its valueFrom) and
// removes medium: Memory from the pod's own emptyDirs (disk mode). Appends
// leave the pod's own entries at their indices.
//
// A JSONPatch rather than an apply configuration: the merge of an apply
// configuration reorders list entries it names that the pod already has and
// cannot remove a field, and it costs the apiserver about twice the CPU per
// pod (typed conversions of the whole pod). Patch values are only ever new
// literals, never parts of the pod: the apiserver converts them to JSON, and
// from 1.37 the pod's own values may reach CEL as typed Go structs, which it
// cannot convert.
//
// annotation is the CEL list of operations that record the block's status.
func (b *block) mutations(annotation string) {
	pd := b.pod
	var ops []string
	if b.selInit != "[]" {
		ops = append(ops, b.containerOps(pd.inits, "initContainers", "")...)
	}
	ops = append(ops, b.containerOps(pd.apps, "containers", b.containerMemory)...)
	if len(b.volumes) > 0 {
		parts := each(b.volumes, func(v *volumeItem) string { return fmt.Sprintf("(%s ? [%s] : [])", v.addVolume, v.literal) })
		ops = append(ops, appendOps(pd.volumes, "'/spec/volumes'", b.def("newVolumes", concat(parts))))
	}
	if m := b.memory; m != nil {
		ops = append(ops, fmt.Sprintf("!%s ? [] : !has(object.spec.resources) ? [JSONPatch{op: 'add', path: '/spec/resources', value: {'limits': {'memory': %s}, 'requests': {'memory': %s}}}] : [%s, %s]",
			m.write, m.limit, m.request, addKey("object.spec.resources", "'/spec/resources'", "limits", "memory", m.limit), addKey("object.spec.resources", "'/spec/resources'", "requests", "memory", m.request)))
	}
	ops = append(ops, annotation)
	for i, e := range b.p.Spec.Env {
		if e.OnConflict != policy.Override {
			continue
		}
		var over []string
		if b.selInit != "[]" {
			over = append(over, b.overrideOps(pd.inits, "initContainers", e))
		}
		over = append(over, b.overrideOps(pd.apps, "containers", e))
		if c := b.envClaimed[i]; c != "false" {
			over = []string{fmt.Sprintf("%s ? [] : %s", c, paren(concat(over)))}
		}
		ops = append(ops, over...)
	}
	if b.converts != "" {
		ops = append(ops, fmt.Sprintf("%s.map(i, JSONPatch{op: 'remove', path: '/spec/volumes/' + string(i) + '/emptyDir/medium'})", b.converts))
	}
	patch := concat(ops)
	if b.matched != "true" {
		patch = fmt.Sprintf("%s ? %s : []", b.matched, paren(patch))
	}
	b.pr.jsonPatch(patch)
}

// setAnnotation returns the CEL list of the operation that sets annotation
// key to the CEL string value.
func setAnnotation(key, value string) string {
	return fmt.Sprintf("[size(object.metadata.?annotations.orValue({})) > 0 ? JSONPatch{op: 'add', path: %s, value: %s} : JSONPatch{op: 'add', path: '/metadata/annotations', value: {%s: %s}}]",
		str("/metadata/annotations/"+pointerEscape(key)), value, str(key), value)
}

// appendOps returns JSONPatch operations that append the items of the list
// expression added to the list expression list at the JSON pointer
// expression path, creating it when the pod has none (JSON omits an empty
// list).
func appendOps(list, path, added string) string {
	added = paren(added)
	return fmt.Sprintf("size(%s) == 0 ? [] : size(%s) > 0 ? %s.map(x, JSONPatch{op: 'add', path: %s + '/-', value: x}) : [JSONPatch{op: 'add', path: %s, value: %s}]",
		added, list, added, path, path, added)
}

// addKey returns a JSONPatch that sets key in the map field of parent (a
// CEL expression of an object that exists, at the JSON pointer expression
// parentPath), creating the map when absent (JSON omits an empty map).
func addKey(parent, parentPath, field, key, value string) string {
	return fmt.Sprintf("size(%s.?%s.orValue({})) > 0 ? JSONPatch{op: 'add', path: %s + %s, value: %s} : JSONPatch{op: 'add', path: %s + %s, value: {%s: %s}}",
		parent, field, parentPath, str("/"+field+"/"+key), value, parentPath, str("/"+field), str(key), value)
}

// pointerEscape escapes a JSON pointer token (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// containerOps returns the JSONPatch operations (CEL lists of them) for the
// containers of list (the pod's field kind) the policy selects: their new
// mounts and env appended, and with memory, their missing memory limit.
func (b *block) containerOps(list, kind string, memory string) []string {
	var mounts, env []string
	for _, v := range b.volumes {
		fields := fmt.Sprintf("'name': dyn(%s), 'mountPath': dyn(%s)", str(v.name), str(v.mountPath))
		if v.readOnly {
			fields += ", 'readOnly': dyn(true)"
		}
		mounts = append(mounts, fmt.Sprintf("(c.name in %s ? [{%s}] : [])", v.add, fields))
	}
	for i, e := range b.p.Spec.Env {
		env = append(env, fmt.Sprintf("(c.name in %s ? [{'name': %s, 'value': %s}] : [])", b.envAdd[i], str(e.Name), str(e.Value)))
	}
	// perContainer returns the operations op (a list of them, c the
	// container, i its index) for every selected container.
	perContainer := func(op string) string {
		return fmt.Sprintf("lists.range(size(%s)).filter(i, %s).map(i, [%s[i]].map(c, %s)[0]).flatten()",
			list, b.selects(list+"[i].name"), list, op)
	}
	path := fmt.Sprintf("'/spec/%s/' + string(i) + '/", kind)
	var ops []string
	appendItems := func(field string, items []string) {
		if len(items) > 0 {
			ops = append(ops, perContainer(appendOps("c.?"+field+".orValue([])", path+field+"'", concat(items))))
		}
	}
	appendItems("volumeMounts", mounts)
	appendItems("env", env)
	if memory != "" {
		// Container-level memory: the headroom, or the container's own
		// request when it is higher, as the limit of every selected app
		// container without one, with an explicit request.
		noLimit := "!('memory' in c.?resources.?limits.orValue({}))"
		noRequest := "!('memory' in c.?resources.?requests.orValue({}))"
		hv, _ := b.p.MemoryLimit.AsInt64()
		req := "c.resources.requests.memory"
		lim := fmt.Sprintf("(%s ? %s : (quantity(%s).asInteger() > %d ? %s : %s))",
			noRequest, str(b.p.MemoryLimit.String()), req, hv, canonicalQuantity(req), str(b.p.MemoryLimit.String()))
		res := path + "resources'"
		if memory != "true" {
			noLimit = and(memory, noLimit)
		}
		ops = append(ops, perContainer(fmt.Sprintf("!%s ? [] : !has(c.resources) ? [JSONPatch{op: 'add', path: %s, value: {'limits': {'memory': %s}, 'requests': {'memory': %s}}}] : [%s] + (%s ? [%s] : [])",
			paren(noLimit), res, str(b.p.MemoryLimit.String()), str(b.p.MemoryRequest.String()),
			addKey("c.resources", res, "limits", "memory", lim),
			noRequest, addKey("c.resources", res, "requests", "memory", str(b.p.MemoryRequest.String())))))
	}
	return ops
}

// overrideOps returns the JSONPatch operations that replace a selected
// container's own value of e (onConflict: override): the first env entry of
// that name, unless it already is the policy's.
func (b *block) overrideOps(list, kind string, e policy.EnvVar) string {
	selected := b.selects(list + "[i].name")
	name := str(e.Name)
	first := fmt.Sprintf("%s[i].env[%s[i].env.map(x, x.name).indexOf(%s)]", list, list, name)
	return fmt.Sprintf("lists.range(size(%s)).filter(i, %s).filter(i, %s[i].?env.orValue([]).exists(x, x.name == %s) && [%s].exists(x, has(x.valueFrom) || x.?value.orValue('') != %s))"+
		".map(i, JSONPatch{op: 'replace', path: '/spec/%s/' + string(i) + '/env/' + string(%s[i].env.map(x, x.name).indexOf(%s)), value: {'name': %s, 'value': %s}})",
		list, selected, list, name, first, str(e.Value), kind, list, name, name, str(e.Value))
}

// statusHead defines the variables of the block's injected and skipped
// items (CEL lists of JSON strings) and returns the CEL of the head of its
// status entry, the entry without its skipped items and closing brace, and
// the skipped items.
func (b *block) statusHead() (head, skipped string) {
	inj := b.def("statusInjected", concat(b.injected))
	skipped = b.def("statusSkipped", concat(b.skipped))
	head = fmt.Sprintf("%s + (size(%s) > 0 ? ',\"injected\":[' + %s.join(',') + ']' : '')",
		str(fmt.Sprintf(`{"name":"%s","hash":"%s","mode":"%s"`, jsonText(b.p.Name()), jsonText(b.p.Hash), jsonText(string(b.mode)))),
		inj, inj)
	return head, skipped
}

// statusMemory returns the CEL of the pod-level memory the block sets, as
// the status annotation's `,"podMemory":{...}` member, or the empty string.
func (b *block) statusMemory() string {
	m := b.memory
	if m == nil {
		return "''"
	}
	return b.def("statusMemory", fmt.Sprintf("%s ? ',\"podMemory\":{\"limit\":\"' + %s + '\"' + (%s ? '' : ',\"request\":\"' + %s + '\"') + '}' : ''",
		m.applied, m.limit, m.ownRequest, m.request))
}

// statusText returns the CEL of the whole status annotation from the
// policies' entries (a CEL list of strings), the emptyDirs moved to disk in
// this pass (a CEL list) plus those an earlier pass moved and are still on
// disk (mutate's carryConversions), and the podMemory member.
func statusText(pr *program, pd *pod, entries, converted, memory string, onDiskExtra []string) string {
	onDisk := fmt.Sprintf("[%s.filter(v, v.name == n)].exists(l, size(l) > 0 && has(l[0].emptyDir) && l[0].emptyDir.?medium.orValue('') != 'Memory')", pd.volumes)
	carried := fmt.Sprintf("%s.filter(n, !(n in %s) && %s)", pd.prevConverted, converted, or(append([]string{onDisk}, onDiskExtra...)...))
	all := pr.def("statusConverted", fmt.Sprintf("(%s + %s).sort()", converted, carried))
	conv := fmt.Sprintf("(size(%s) > 0 ? ',\"converted\":[' + %s.map(n, '\"' + n + '\"').join(',') + ']' : '')", all, all)
	return pr.def("status", fmt.Sprintf("'{\"policies\":[' + %s.join(',') + ']' + %s + %s + '}'", entries, conv, memory))
}

// status returns the CEL of the status annotation the webhook writes
// (mutate/status.go) for a policy alone in its MAP: its entry in "policies"
// (name, hash, mode, what it injected and skipped), the pod's emptyDirs it
// moves to disk, and the pod-level memory it sets. The pod it reads is the
// pod before the policy's own mutation, so a disk-mode cache it adds in this
// pass is on disk afterwards too.
func (b *block) status() string {
	head, sk := b.statusHead()
	entry := b.def("statusEntry", fmt.Sprintf("%s + (size(%s) > 0 ? ',\"skipped\":[' + %s.join(',') + ']' : '') + '}'", head, sk, sk))
	converted := convertedNames(b.pr, b.pod, b.converts)
	memory := b.statusMemory()
	var diskCaches []string
	for _, v := range b.volumes {
		if v.cache && b.mode == policy.ModeDisk {
			diskCaches = append(diskCaches, fmt.Sprintf("(n == %s && %s)", str(v.name), v.addVolume))
		}
	}
	return statusText(b.pr, b.pod, "["+entry+"]", converted, memory, diskCaches)
}

// convertedNames defines the names of the volumes at the indices converts
// (none when empty), moved to disk in this pass.
func convertedNames(pr *program, pd *pod, converts string) string {
	if converts == "" {
		return pr.def("convertedNow", "[]")
	}
	return pr.def("convertedNow", fmt.Sprintf("%s.map(i, %s[i].name)", converts, pd.volumes))
}
