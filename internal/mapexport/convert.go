package mapexport

import (
	"fmt"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// keeps returns the CEL condition that keepMemoryVolumes names the volume v
// (by name, or by a mount at one of its paths in any container).
func (b *block) keeps(v string) string {
	pd := b.pod
	var keeps []string
	for _, ref := range b.p.Spec.KeepMemoryVolumes {
		if ref.Name != "" {
			keeps = append(keeps, fmt.Sprintf("%s.name == %s", v, str(ref.Name)))
		}
		if ref.MountPath != "" {
			keeps = append(keeps, fmt.Sprintf("(%s + %s).exists(c, c.?volumeMounts.orValue([]).exists(m, m.mountPath == %s && m.name == %s.name))",
				pd.inits, pd.apps, str(ref.MountPath), v))
		}
	}
	return or(keeps...)
}

// convert follows mutate's applier.convert for a disk-mode policy alone in
// its MAP: the pod's own memory-backed emptyDirs move to disk, except those
// keepMemoryVolumes names and those named like one of its caches or assets.
// Such a volume is that item's, whether the policy injects it or skips it
// (the pod has a different volume of that name, no container can mount it):
// the pod keeps its own whole, medium included. The mounts its block adds
// are of its own volumes, so the pod as it arrives keeps by mount path what
// the pod after its injections would.
func (b *block) convert() {
	pd := b.pod
	keep := b.keeps("v")
	own := memoryEmptyDir
	if len(b.volumes) > 0 {
		names := each(b.volumes, func(v *volumeItem) string { return str(v.name) })
		own = and(own, fmt.Sprintf("!(v.name in [%s])", strings.Join(names, ", ")))
	}
	b.converts = b.def("convertIndices", fmt.Sprintf("lists.range(size(%s)).filter(i, [%s[i]].all(v, %s && !%s))",
		pd.volumes, pd.volumes, own, paren(keep)))
	b.skipped = append(b.skipped, fmt.Sprintf("%s.filter(v, %s && %s).map(v, %s + v.name + %s)",
		pd.volumes, own, paren(keep), opening("convert/"), closing(": kept on tmpfs by keepMemoryVolumes")))
}

// conversion follows mutate's conversion for the policies of a set compiled
// into one MAP: after every policy has injected, the first disk-mode policy
// (in name order) that selects the pod decides about each of the pod's own
// memory-backed emptyDirs: those its keepMemoryVolumes names stay on tmpfs
// and are recorded as skipped in its status entry, the rest move to disk. A
// later disk-mode policy neither converts nor records anything, so a second
// pass, which finds the same first policy and the converted volumes on
// disk, decides the same. A memory-backed emptyDir named like a cache or an
// asset whose volume name a policy claims (cl: the first policy that
// declares the name and selects the pod, unless an even earlier one holds
// the name or the mount path) is that item's and stays, whether the policy
// injected it or kept the pod's own: the pod keeps its own whole, medium
// included. Its variables are read in the MAP's last mutation, on the pod
// after every policy's mutation, as the webhook reads the pod after every
// policy's apply.
//
// It returns the indices of the volumes to move to disk and, per block, the
// CEL list of the skipped items to append to its status entry ("[]" for a
// block that keeps nothing).
func conversion(pr *program, pd *pod, blocks []*block, cl claims) (converts string, kept []string) {
	// The volume names a policy claims, each once, in the order the
	// policies declare them.
	var names []string
	seen := map[string]bool{}
	for _, b := range blocks {
		for _, v := range b.volumes {
			if seen[v.name] {
				continue
			}
			seen[v.name] = true
			holds := each(cl["volume/"+v.name], func(c claim) string { return c.holds })
			names = append(names, fmt.Sprintf("%s ? [%s] : []", or(holds...), str(v.name)))
		}
	}
	tmpfs := memoryEmptyDir
	if len(names) > 0 {
		tmpfs = and(tmpfs, fmt.Sprintf("!(v.name in %s)", pr.def("volumesClaimed", concat(names))))
	}
	// own: the indices of the pod's own memory-backed emptyDirs that no
	// policy's cache or asset names, not yet on disk.
	own := pr.def("tmpfsOwn", fmt.Sprintf("lists.range(size(%s)).filter(i, [%s[i]].all(v, %s))",
		pd.volumes, pd.volumes, tmpfs))
	kept = make([]string, len(blocks))
	var (
		earlier []string // the matches of the disk-mode blocks before
		moves   []string // per disk-mode block: when it decides, what it moves
	)
	for k, b := range blocks {
		kept[k] = "[]"
		if b.mode != policy.ModeDisk {
			continue
		}
		// The policy decides when it selects the pod and no disk-mode
		// policy before it does.
		decides := and(b.matched, not(or(earlier...)))
		earlier = append(earlier, b.matched)
		keep := b.keeps("v")
		if keep == "false" {
			moves = append(moves, fmt.Sprintf("%s ? %s", b.matched, own))
			continue
		}
		keeps := b.def("tmpfsKept", fmt.Sprintf("%s.filter(i, [%s[i]].all(v, %s))", own, pd.volumes, keep))
		moves = append(moves, fmt.Sprintf("%s ? %s.filter(i, !(i in %s))", b.matched, own, keeps))
		kept[k] = b.def("statusKept", fmt.Sprintf("%s ? %s.map(i, %s + %s[i].name + %s) : []",
			decides, keeps, opening("convert/"), pd.volumes, closing(": kept on tmpfs by keepMemoryVolumes")))
	}
	if len(moves) == 0 {
		return "", kept // no disk-mode policy
	}
	// The first disk-mode policy that selects the pod moves what it does
	// not keep; none selecting it, nothing moves.
	converts = pr.def("convertIndices", strings.Join(append(moves, "[]"), " : "))
	return converts, kept
}
