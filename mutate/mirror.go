package mutate

import (
	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
)

// mirrors rewrites the pod's images by the policy's mirror rules: every
// init and app container's (the container selector chooses mounts and env,
// not where images come from) and every image volume's, the assets' too.
// An image a rule's to already holds is reported as present, so a second
// pass records what the first did.
func (a *applier) mirrors(_ []target) {
	if len(a.p.Mirrors) == 0 {
		return
	}
	spec := &a.pod.Spec
	for c := range PodContainers(spec) {
		a.item(func() { a.mirror("mirror/"+c.Name, &c.Image) })
	}
	for i := range spec.Volumes {
		if img := spec.Volumes[i].Image; img != nil {
			a.item(func() { a.mirror("mirror/volume/"+spec.Volumes[i].Name, &img.Reference) })
		}
	}
}

// mirror rewrites *image by the first rule that holds it.
func (a *applier) mirror(item string, image *string) {
	out, rule, err := imageref.Rewrite(*image, a.p.Mirrors)
	switch {
	case err != nil:
		a.skip(item, err.Error(), false)
	case rule >= 0:
		*image = out
		a.st.dirty = true
		a.applied(item)
	case imageref.Mirrored(*image, a.p.Mirrors):
		a.applied(item)
	}
}

// mirrored is image as the policy's mirrors rewrite it: what the policy
// injects is what a second pass wants.
func (a *applier) mirrored(image string) string {
	if out, rule, err := imageref.Rewrite(image, a.p.Mirrors); err == nil && rule >= 0 {
		return out
	}
	return image
}
