package mapexport

import (
	"fmt"
	"strings"
)

// exactly returns the CEL condition that the volume v has only a name and
// the source, whose string fields (pairs of key and value, "" for absent)
// are those given, and the further conditions hold.
func exactly(v, source string, fields []string, more ...string) string {
	conds := []string{fmt.Sprintf("%s.all(k, k in ['name', '%s'])", v, source), fmt.Sprintf("has(%s.%s)", v, source)}
	for i := 0; i < len(fields); i += 2 {
		conds = append(conds, fmt.Sprintf("%s.%s.?%s.orValue('') == %s", v, source, fields[i], str(fields[i+1])))
	}
	return and(append(conds, more...)...)
}

// volume defines the variables of one volume item, following
// mutate's applier.volume.
func (b *block) volume(id string, v *volumeItem) {
	pd := b.pod
	if strings.HasPrefix(v.item, "(") {
		v.item = b.def(id+"Item", v.item)
	}
	claimed, why := b.claimed(id, "volume/"+v.name, "path/"+v.mountPath)
	v.existing = b.def(id+"Existing", fmt.Sprintf("%s.filter(v, v.name == %s)", pd.volumes, str(v.name)))
	v.blocked = b.def(id+"Blocked", or(claimed, fmt.Sprintf("size(%s) > 0 && !%s", v.existing, paren(v.want(v.existing+"[0]")))))
	mp := str(v.mountPath)
	// The pod mounts the volume other than the policy does (mutate's
	// foreignReference): nothing is injected.
	ro := ""
	if v.readOnly {
		ro = " || !m.?readOnly.orValue(false)"
	}
	foreignMount := fmt.Sprintf("c.?volumeMounts.orValue([]).exists(m, m.name == %s && (m.mountPath != %s%s || "+
		"m.?subPath.orValue('') != '' || m.?subPathExpr.orValue('') != '' || m.?mountPropagation.orValue('None') != 'None')) || "+
		"c.?volumeDevices.orValue([]).exists(d, d.name == %s)", str(v.name), mp, ro, str(v.name))
	v.foreign = b.def(id+"Foreign", fmt.Sprintf("!%s && (%s.exists(c, %s) || %s.exists(c, %s) || %s.exists(c, %s))",
		v.blocked, pd.inits, foreignMount, pd.apps, foreignMount, pd.ephemerals, foreignMount))
	stop := fmt.Sprintf("(%s || %s)", v.blocked, v.foreign)
	// Mount paths compare as mutate's normMountPath reads them: without
	// empty and "." components; one with a ".." component is near any path.
	norm := "('/' + m.mountPath.split('/').filter(s, s != '' && s != '.').join('/'))"
	dotdot := "m.mountPath.split('/').exists(s, s == '..')"
	at := fmt.Sprintf("(!%s && %s == %s)", dotdot, norm, mp)
	near := fmt.Sprintf("(%s || %s == '/' || %s.startsWith(%s) || %s.startsWith(%s + '/'))", dotdot, norm, norm, str(v.mountPath+"/"), mp, norm)
	mounts := "c.?volumeMounts.orValue([])"
	v.conflicts = b.def(id+"Conflicts", fmt.Sprintf(
		"%s ? [] : %s.filter(c, %s.exists(m, %s && m.name != %s) || !%s.exists(m, %s) && %s.exists(m, %s)).map(c, "+
			"%s + %s + '[' + c.name + %s + c.name + %s + "+
			"(c.volumeMounts.exists(m, %s) ? c.volumeMounts.filter(m, %s)[0].name + %s : c.volumeMounts.filter(m, %s)[0].name + %s))",
		stop, b.sel, mounts, at, str(v.name), mounts, at, mounts, near,
		quote, v.item, text(`]: container "`), text(`" already mounts volume "`),
		at, at, closing(`" at `+v.mountPath+`; kept`), near, closing(`" under or above `+v.mountPath+`; kept`)))
	v.add = b.def(id+"Mount", fmt.Sprintf("%s ? [] : %s.filter(c, !%s.exists(m, %s || %s)).map(c, c.name)",
		stop, b.sel, mounts, at, near))
	v.injected = b.def(id+"Injected", fmt.Sprintf("!%s && size(%s) > size(%s)", stop, b.sel, v.conflicts))
	v.addVolume = b.def(id+"AddVolume", fmt.Sprintf("%s && size(%s) == 0", v.injected, v.existing))

	entry := func(reason string) string { return fmt.Sprintf("[%s + %s + %s]", quote, v.item, closing(": "+reason)) }
	skipped := ""
	if claimed != "false" {
		skipped = fmt.Sprintf("%s ? [%s + %s + ': ' + %s + %s] : ", claimed, quote, v.item, why, quote)
	}
	how := "at " + v.mountPath
	if v.readOnly {
		how = "read-only " + how
	}
	foreignWhy := fmt.Sprintf("the pod mounts volume %q other than %s, whole and without propagation; ", v.name, how)
	// No container can mount it: reported whether or not the pod has an
	// identical volume.
	b.skipped = append(b.skipped, skipped+fmt.Sprintf("%s ? %s : %s ? (size(%s) == 0 ? %s : %s) : size(%s) == 0 ? %s : %s + (%s ? [] : %s)",
		v.blocked, entry(fmt.Sprintf("the pod already has a volume named %q; the pod's own is kept", v.name)),
		v.foreign, v.existing,
		entry(foreignWhy+"not injected; the apiserver rejects the mount of an undeclared volume"),
		entry(foreignWhy+"nothing more is mounted"),
		b.sel, entry("no container is selected"),
		v.conflicts,
		v.injected, entry("every selected container already mounts something at "+v.mountPath)))
	b.injected = append(b.injected, fmt.Sprintf("%s ? [%s + %s + %s] : []", v.injected, quote, v.item, quote))
	b.volumes = append(b.volumes, v)
}
