package mapexport

import (
	"fmt"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

func (b *block) asset(i int, a policy.Asset) {
	v := &volumeItem{name: a.Name, mountPath: a.MountPath, readOnly: true}
	var hostPath, image *volumeItem
	if h := a.HostPath; h != nil {
		hostPath = &volumeItem{
			item:    str("asset/" + a.Name + ":hostPath"),
			literal: fmt.Sprintf("{'name': dyn(%s), 'hostPath': dyn({'path': %s, 'type': %s})}", str(a.Name), str(h.Path), str(h.Type)),
			want:    func(v string) string { return exactly(v, "hostPath", []string{"path", h.Path, "type", h.Type}) },
		}
	}
	if img := a.Image; img != nil {
		fields := []string{"'reference': " + str(img.Reference)}
		if img.PullPolicy != "" {
			fields = append(fields, "'pullPolicy': "+str(img.PullPolicy))
		}
		image = &volumeItem{
			item:    str("asset/" + a.Name + ":image"),
			literal: fmt.Sprintf("{'name': dyn(%s), 'image': dyn({%s})}", str(a.Name), strings.Join(fields, ", ")),
			want: func(v string) string {
				return exactly(v, "image", []string{"reference", img.Reference, "pullPolicy", img.PullPolicy})
			},
		}
	}
	switch {
	case hostPath != nil && image != nil:
		// The image source where the namespace's Pod Security level
		// forbids hostPath volumes.
		f := b.pod.forbidsHostPath
		v.item = fmt.Sprintf("(%s ? %s : %s)", f, image.item, hostPath.item)
		v.literal = fmt.Sprintf("(%s ? %s : %s)", f, image.literal, hostPath.literal)
		v.want = func(x string) string {
			return fmt.Sprintf("(%s ? %s : %s)", f, paren(image.want(x)), paren(hostPath.want(x)))
		}
	case hostPath != nil:
		// Injected even where Pod Security forbids it: a loud rejection
		// beats a silent zero reward (the webhook also warns).
		v.item, v.literal, v.want = hostPath.item, hostPath.literal, hostPath.want
	default:
		v.item, v.literal, v.want = image.item, image.literal, image.want
	}
	b.volume(fmt.Sprintf("asset%d", i), v)
}
