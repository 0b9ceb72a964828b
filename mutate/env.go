package mutate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// envs sets the policy's environment variables in the selected containers.
func (a *applier) envs(sel []target) {
	for _, e := range a.p.Spec.Env {
		a.item(func() { a.env(e, sel) })
	}
}

func (a *applier) env(e policy.EnvVar, sel []target) {
	item := "env/" + e.Name
	if !a.claim(item, item) {
		return
	}
	if len(sel) == 0 {
		a.skip(item, "no container is selected", false)
		return
	}
	for _, t := range sel {
		c := t.c
		if e.Position != "" {
			a.envEntry(item, e, c)
			continue
		}
		idx := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name })
		switch {
		case idx < 0:
			c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			a.st.dirty = true
		case c.Env[idx].ValueFrom == nil && c.Env[idx].Value == e.Value:
			// Already what the policy wants.
		case e.OnConflict == policy.Override:
			c.Env[idx] = corev1.EnvVar{Name: e.Name, Value: e.Value}
			a.st.dirty = true
		default:
			a.skip(fmt.Sprintf("%s[%s]", item, c.Name),
				fmt.Sprintf("container %q sets its own %s; kept (onConflict: keep)", c.Name, e.Name), true)
		}
	}
	a.applied(item)
}

// envEntry adds e's value as one entry of c's list variable (PATH), once:
// first or last, with the container's own value kept after or before it.
// A container that does not set the variable gets ifUnset with the entry,
// or nothing: its image's own value is not in the pod.
func (a *applier) envEntry(item string, e policy.EnvVar, c *corev1.Container) {
	idx := -1
	for i := range c.Env { // the last of a name is the one the container gets
		if c.Env[i].Name == e.Name {
			idx = i
		}
	}
	sub := fmt.Sprintf("%s[%s]", item, c.Name)
	switch {
	case idx < 0 && e.IfUnset == "":
		a.skip(sub, fmt.Sprintf("container %q does not set %s, and its image's own value is not in the pod; not added (set ifUnset to the list to add it to)", c.Name, e.Name), true)
	case idx < 0:
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: withEntry(e, e.IfUnset)})
		a.st.dirty = true
	case c.Env[idx].ValueFrom != nil:
		a.skip(sub, fmt.Sprintf("container %q sets %s from a reference (valueFrom), which cannot be added to; kept", c.Name, e.Name), true)
	case hasEntry(e, c.Env[idx].Value):
		// Added already, by an earlier pass or by the pod.
	default:
		c.Env[idx].Value = withEntry(e, c.Env[idx].Value)
		a.st.dirty = true
	}
}

// hasEntry reports whether list has e's entry where e puts it.
func hasEntry(e policy.EnvVar, list string) bool {
	if e.Position == policy.Prepend {
		return list == e.Value || strings.HasPrefix(list, e.Value+e.Separator)
	}
	return list == e.Value || strings.HasSuffix(list, e.Separator+e.Value)
}

// withEntry is list with e's entry added where e puts it.
func withEntry(e policy.EnvVar, list string) string {
	switch {
	case list == "":
		return e.Value
	case e.Position == policy.Prepend:
		return e.Value + e.Separator + list
	}
	return list + e.Separator + e.Value
}
