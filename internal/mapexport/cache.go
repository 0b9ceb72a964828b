package mapexport

import (
	"fmt"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

func (b *block) cache(i int, c policy.Cache) {
	medium := ""
	if b.mode == policy.ModeMemory {
		medium = "Memory"
	}
	var fields []string
	if medium != "" {
		fields = append(fields, "'medium': "+str(medium))
	}
	size := ""
	if q := b.p.CacheSizes[i]; q != nil {
		size = q.String()
		fields = append(fields, "'sizeLimit': "+str(size))
	}
	v := &volumeItem{
		name:      c.Name,
		mountPath: c.MountPath,
		cache:     true,
		item:      str("cache/" + c.Name),
		literal:   fmt.Sprintf("{'name': dyn(%s), 'emptyDir': dyn({%s})}", str(c.Name), strings.Join(fields, ", ")),
		want: func(v string) string {
			sizeCond := fmt.Sprintf("!has(%s.emptyDir.sizeLimit)", v)
			if size != "" {
				sizeCond = fmt.Sprintf("has(%s.emptyDir.sizeLimit) && quantity(%s.emptyDir.sizeLimit).compareTo(quantity(%s)) == 0", v, v, str(size))
			}
			return exactly(v, "emptyDir", []string{"medium", medium}, sizeCond)
		},
	}
	b.volume(fmt.Sprintf("cache%d", i), v)
}
