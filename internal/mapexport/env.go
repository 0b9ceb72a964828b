package mapexport

import (
	"fmt"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

func (b *block) env(i int, e policy.EnvVar) {
	id := fmt.Sprintf("env%d", i)
	name := str(e.Name)
	item := "env/" + e.Name
	claimed, why := b.claimed(id, item)
	b.envClaimed = append(b.envClaimed, claimed)
	sel, skipEmpty := b.sel, jsonString(item+": no container is selected")
	if claimed != "false" {
		sel = fmt.Sprintf("(%s ? [] : %s)", claimed, b.sel)
		skipEmpty = fmt.Sprintf("%s ? %s + %s + %s : %s", claimed, opening(item+": "), why, quote, skipEmpty)
	}
	has := fmt.Sprintf("c.?env.orValue([]).exists(x, x.name == %s)", name)
	b.envAdd = append(b.envAdd, b.def(id+"Add", fmt.Sprintf("%s.filter(c, !%s).map(c, c.name)", sel, has)))
	b.injected = append(b.injected, fmt.Sprintf("size(%s) > 0 ? [%s] : []", sel, jsonString(item)))
	kept := "[]"
	if e.OnConflict != policy.Override {
		// The pod's own value is kept (onConflict: keep): reported per
		// container, unless it already is the policy's.
		kept = b.def(id+"Kept", fmt.Sprintf(
			"%s.filter(c, %s && [c.env.filter(x, x.name == %s)[0]].exists(x, has(x.valueFrom) || x.?value.orValue('') != %s)).map(c, "+
				"%s + c.name + %s + c.name + %s)",
			sel, has, name, str(e.Value),
			opening(item+"["), text(`]: container "`), closing(fmt.Sprintf(`" sets its own %s; kept (onConflict: keep)`, e.Name))))
	}
	b.skipped = append(b.skipped, fmt.Sprintf("size(%s) == 0 ? [%s] : %s", sel, skipEmpty, kept))
}
