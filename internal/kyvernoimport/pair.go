package kyvernoimport

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// pairInit merges each rule that puts into the init containers exactly
// what another rule of the same match puts into the app containers into
// that rule: the two together are what one SandboxPolicy does with its init
// containers included. A rule whose init-container parts differ is left to
// check, which says why it does not convert.
func pairInit(rcs []*ruleConverter) {
	for _, b := range rcs {
		if b.inj.reach() != inInit || b.inj.memory != nil || b.inj.disk != nil || !b.inj.place.empty() {
			continue
		}
		var differ []string
		for _, a := range rcs {
			if a == b || a.pairedInto != nil || a.inj.reach() != inContainers || !sameMatch(a.m, b.m) {
				continue
			}
			if a.inj.memory != nil && a.inj.memory.Level != policy.LevelPod || !a.inj.samePerContainer(b.inj) || !selectionOf(a.inj).equal(selectionOf(b.inj)) {
				differ = append(differ, a.name)
				continue
			}
			for _, l := range a.inj.lists() {
				*l |= inInit
			}
			b.pairedInto = a
			break
		}
		if b.pairedInto == nil && differ != nil {
			b.leave(b.path.Child("mutate"), fmt.Sprintf("puts into the init containers other mounts, env or volumes than rule %s of the same match puts into the app containers: "+
				"a SandboxPolicy puts the same into both, or into the app containers alone", strings.Join(differ, ", ")))
		}
	}
}

// reach is the container lists every mount and env var of inj goes into,
// when they all go into the same; 0 otherwise.
func (inj *injection) reach() int {
	lists := 0
	for _, l := range inj.lists() {
		if lists != 0 && *l != lists {
			return 0
		}
		lists = *l
	}
	return lists
}

// lists are the container lists of every mount, env var and image rewrite
// of inj, to read or to add to.
func (inj *injection) lists() []*int {
	var out []*int
	for _, m := range inj.mounts {
		out = append(out, &m.lists)
	}
	for i := range inj.env {
		out = append(out, &inj.env[i].lists)
	}
	for i := range inj.mirrors {
		out = append(out, &inj.mirrors[i].lists)
	}
	return out
}

// samePerContainer reports whether o mounts and sets in its containers
// what inj does in its, and declares no volume inj does not declare alike.
func (inj *injection) samePerContainer(o *injection) bool {
	same := func(a, b *mount) bool { return a.mountPath == b.mountPath && a.readOnly == b.readOnly }
	sameMirror := func(a, b mirror) bool { return a.ImageMirror == b.ImageMirror }
	if !maps.EqualFunc(inj.mounts, o.mounts, same) || len(inj.env) != len(o.env) || !slices.EqualFunc(inj.mirrors, o.mirrors, sameMirror) {
		return false
	}
	for _, e := range o.env {
		if !slices.ContainsFunc(inj.env, func(f envVar) bool { return f.EnvVar == e.EnvVar }) {
			return false
		}
	}
	for _, v := range o.volumes {
		if !slices.ContainsFunc(inj.volumes, func(w volume) bool {
			return w.name == v.name && w.medium == v.medium && w.sizeLimit == v.sizeLimit &&
				(w.hostPath == nil) == (v.hostPath == nil) && (w.hostPath == nil || *w.hostPath == *v.hostPath)
		}) {
			return false
		}
	}
	return true
}

func sameMatch(a, b policy.Match) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// selectionOf is the containers inj's parts go into by name.
func selectionOf(inj *injection) selection {
	if inj.sel == nil {
		return selection{}
	}
	return *inj.sel
}
