package mapexport

import (
	"fmt"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// mutations adds the block's two mutations:
//
//  1. an ApplyConfiguration that appends what is missing (volumes, mounts,
//     env, memory) and writes the status annotation. Every decision is
//     taken on the pod as it arrived, as the webhook takes it, and only new
//     list entries are applied: the merge keys (volumes by name, mounts by
//     mountPath, env by name) would otherwise reorder the pod's own entries.
//  2. a JSONPatch for what an apply configuration cannot express: replacing
//     a pod's own env var (onConflict: override, which drops its valueFrom)
//     and removing medium: Memory from the pod's own emptyDirs (disk mode).
//     It runs on the result of 1, whose new entries come after the pod's
//     own, so the pod's indices are unchanged.
func (b *block) mutations(status string) {
	spec := []string{
		"initContainers: " + b.containerPatches(b.selInit, "initContainers", false),
		"containers: " + b.containerPatches(b.selApp, "containers", b.containerMemory),
		"volumes: " + b.newVolumes(),
	}
	if m := b.memory; m != nil {
		spec = append(spec, fmt.Sprintf("?resources: %s ? optional.of(Object.spec.resources{limits: {'memory': %s}, requests: {'memory': %s}}) : optional.none()",
			m.write, m.limit, m.request))
	}
	b.pr.apply(fmt.Sprintf("Object{\n  metadata: Object.metadata{annotations: {%s: %s}},\n  spec: Object.spec{\n    %s\n  }\n}",
		str(mutate.StatusAnnotation), status, strings.Join(spec, ",\n    ")))

	var ops []string
	for _, e := range b.p.Spec.Env {
		if e.OnConflict != policy.Override {
			continue
		}
		if b.selInit != "[]" {
			ops = append(ops, b.overrideOps(b.pod.inits, "initContainers", e))
		}
		ops = append(ops, b.overrideOps(b.pod.apps, "containers", e))
	}
	if b.converts != "" {
		ops = append(ops, fmt.Sprintf("%s.map(i, JSONPatch{op: 'remove', path: '/spec/volumes/' + string(i) + '/emptyDir/medium'})", b.converts))
	}
	if len(ops) > 0 {
		b.pr.jsonPatch(concat(ops))
	}
}

// containerPatches returns the apply configuration list of the containers
// in sel (of the pod's field kind) that get a mount, an env var or a memory
// limit.
func (b *block) containerPatches(sel, kind string, memory bool) string {
	if sel == "[]" {
		return "[]"
	}
	typ := "Object.spec." + kind
	var needs, mounts, env []string
	for _, v := range b.volumes {
		needs = append(needs, "c.name in "+v.add)
		ro := ""
		if v.readOnly {
			ro = ", readOnly: true"
		}
		mounts = append(mounts, fmt.Sprintf("(c.name in %s ? [%s.volumeMounts{name: %s, mountPath: %s%s}] : [])",
			v.add, typ, str(v.name), str(v.mountPath), ro))
	}
	for i, e := range b.p.Spec.Env {
		needs = append(needs, "c.name in "+b.envAdd[i])
		env = append(env, fmt.Sprintf("(c.name in %s ? [%s.env{name: %s, value: %s}] : [])", b.envAdd[i], typ, str(e.Name), str(e.Value)))
	}
	fields := []string{"name: c.name"}
	if len(mounts) > 0 {
		fields = append(fields, "volumeMounts: "+strings.Join(mounts, " + "))
	}
	if len(env) > 0 {
		fields = append(fields, "env: "+strings.Join(env, " + "))
	}
	if memory {
		// Container-level memory: the headroom as the limit of every
		// selected app container without one, with an explicit request.
		noLimit := "!has(c.resources) || !has(c.resources.limits) || !('memory' in c.resources.limits)"
		hasReq := "has(c.resources) && has(c.resources.requests) && 'memory' in c.resources.requests"
		needs = append(needs, noLimit)
		fields = append(fields, fmt.Sprintf("?resources: (%s) ? optional.of(%s.resources{limits: {'memory': %s}, ?requests: (%s) ? optional.none() : optional.of({'memory': %s})}) : optional.none()",
			noLimit, typ, str(b.p.MemoryLimit.String()), hasReq, str(b.p.MemoryRequest.String())))
	}
	if len(needs) == 0 {
		return "[]"
	}
	return fmt.Sprintf("%s.filter(c, %s).map(c, %s{%s})", sel, or(needs...), typ, strings.Join(fields, ", "))
}

func (b *block) newVolumes() string {
	if len(b.volumes) == 0 {
		return "[]"
	}
	var parts []string
	for _, v := range b.volumes {
		parts = append(parts, fmt.Sprintf("(%s ? [%s] : [])", v.addVolume, v.literal))
	}
	return strings.Join(parts, " + ")
}

// overrideOps returns the JSONPatch operations that replace a selected
// container's own value of e (onConflict: override): the first env entry of
// that name, unless it already is the policy's.
func (b *block) overrideOps(list, kind string, e policy.EnvVar) string {
	cs := b.p.Spec.Containers
	selected := and(globsMatch(list+"[i].name", cs.Include), not(orEmpty(cs.Exclude, func(g []string) string { return globsMatch(list+"[i].name", g) })))
	name := str(e.Name)
	first := fmt.Sprintf("%s[i].env[%s[i].env.map(x, x.name).indexOf(%s)]", list, list, name)
	return fmt.Sprintf("lists.range(size(%s)).filter(i, %s).filter(i, %s[i].?env.orValue([]).exists(x, x.name == %s) && [%s].exists(x, has(x.valueFrom) || x.?value.orValue('') != %s))"+
		".map(i, JSONPatch{op: 'replace', path: '/spec/%s/' + string(i) + '/env/' + string(%s[i].env.map(x, x.name).indexOf(%s)), value: {'name': %s, 'value': %s}})",
		list, selected, list, name, first, str(e.Value), kind, list, name, name, str(e.Value))
}

// status returns the CEL of the status annotation the webhook writes for
// this policy alone (mutate/status.go): name, hash, mode, what was injected
// and skipped, the emptyDirs moved to disk and the pod-level memory set.
func (b *block) status(mode policy.Mode) string {
	pr, pd := b.pr, b.pod
	inj := pr.def("statusInjected", concat(b.injected))
	sk := pr.def("statusSkipped", concat(b.skipped))
	frag := fmt.Sprintf("%s + (size(%s) > 0 ? ',\"injected\":[' + %s.join(',') + ']' : '') + (size(%s) > 0 ? ',\"skipped\":[' + %s.join(',') + ']' : '') + '}'",
		str(fmt.Sprintf(`{"name":"%s","hash":"%s","mode":"%s"`, jsonText(b.p.Name()), jsonText(b.p.Hash), jsonText(string(mode)))),
		inj, inj, sk, sk)

	converted := "[]"
	if b.converts != "" {
		converted = fmt.Sprintf("%s.map(i, %s[i].name)", b.converts, pd.volumes)
	}
	converted = pr.def("convertedNow", converted)
	// An earlier pass's conversions stay recorded while the volume is
	// still on disk (mutate's carryConversions).
	var diskCaches []string
	for _, v := range b.volumes {
		if v.cache && b.mode == policy.ModeDisk {
			diskCaches = append(diskCaches, fmt.Sprintf("(n == %s && %s)", str(v.name), v.addVolume))
		}
	}
	onDisk := fmt.Sprintf("[%s.filter(v, v.name == n)].exists(l, size(l) > 0 && has(l[0].emptyDir) && l[0].emptyDir.?medium.orValue('') != 'Memory')", pd.volumes)
	carried := fmt.Sprintf("%s.filter(n, !(n in %s) && %s)", pd.prevConverted, converted, or(append([]string{onDisk}, diskCaches...)...))
	all := pr.def("statusConverted", fmt.Sprintf("(%s + %s).sort()", converted, carried))
	conv := fmt.Sprintf("(size(%s) > 0 ? ',\"converted\":[' + %s.map(n, '\"' + n + '\"').join(',') + ']' : '')", all, all)

	mem := "''"
	if m := b.memory; m != nil {
		mem = fmt.Sprintf("(%s ? '' : ',\"podMemory\":{\"limit\":\"' + %s + '\"' + (%s ? '' : ',\"request\":\"' + %s + '\"') + '}')",
			m.kept, m.limit, m.ownRequest, m.request)
	}
	return pr.def("status", fmt.Sprintf("'{\"policies\":[' + %s + ']' + %s + %s + '}'", frag, conv, mem))
}
