package mutate

import (
	"fmt"
	"slices"

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
	if owner, ok := a.claims[item]; ok {
		a.skip(item, fmt.Sprintf("%s is claimed by policy %q, which applies first", item, owner), true)
		return
	}
	a.claims[item] = a.p.Name()
	if len(sel) == 0 {
		a.skip(item, "no container is selected", false)
		return
	}
	for _, t := range sel {
		c := t.c
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
