package mutate

import (
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A quantity is believed only when it is bounded (see Bounded): what the pod
// author writes reaches resource.Quantity's arithmetic, which compares and
// adds quantities of different scales in arbitrary precision, computing
// 10^exponent as a big integer with no deadline. A 200-byte pod with a
// memory limit of 1e10000000 held a replica's core for minutes.
const (
	// maxQuantityDigits bounds a quantity's magnitude: below 10^18, about
	// 888 PiB of memory or disk, beyond what any node holds.
	maxQuantityDigits = 18
	// maxQuantityScale bounds its exponent both ways: from 10^-18 to 10^18
	// (a parsed quantity that is not zero has at most nine decimals), so
	// that comparing two bounded quantities needs at most a few dozen digits.
	maxQuantityScale = 18
)

// pow10 are the powers of ten a bound is checked against: 10^0 to
// 10^(maxQuantityDigits+maxQuantityScale).
var pow10 = func() []*big.Int {
	out := make([]*big.Int, maxQuantityDigits+maxQuantityScale+1)
	for i := range out {
		out[i] = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(i)), nil)
	}
	return out
}()

// Bounded reports whether q is below 10^18 in magnitude and its exponent
// within ±18: a value every comparison and sum of the core handles in a few
// dozen digits. It does no arithmetic on the exponent itself.
func Bounded(q resource.Quantity) bool {
	d := q.AsDec()            // q is a copy: the caller's quantity keeps its form
	scale := int64(d.Scale()) // the value is unscaled × 10^-scale
	if scale < -maxQuantityScale || scale > maxQuantityScale {
		return false
	}
	u := d.UnscaledBig()
	if u.Sign() == 0 {
		return true
	}
	// |unscaled| × 10^-scale < 10^18 ⇔ |unscaled| < 10^(18+scale).
	return u.CmpAbs(pow10[maxQuantityDigits+scale]) < 0
}

// parseBounded parses s as a quantity and reports whether it parsed and is
// bounded: how a quantity read back from the status annotation is believed.
func parseBounded(s string) (resource.Quantity, bool) {
	q, err := resource.ParseQuantity(s)
	if err != nil || !Bounded(q) {
		return resource.Quantity{}, false
	}
	return q, true
}

// UnboundedQuantity returns the path and value of the first quantity of the
// pod's spec that is not Bounded, or "". It looks at every quantity of the
// spec: the resources of every container (init, app and ephemeral) and of
// the pod, the overhead, every volume's (an emptyDir's sizeLimit, a
// generic ephemeral volume's claim) and every downward API divisor; the
// status plays no part in a mutation.
func UnboundedQuantity(spec *corev1.PodSpec) string {
	list := func(path string, l corev1.ResourceList) string {
		for name, q := range l {
			if !Bounded(q) {
				return fmt.Sprintf("%s[%s]", path, name)
			}
		}
		return ""
	}
	divisors := func(path string, env []corev1.EnvVar) string {
		for i := range env {
			if v := env[i].ValueFrom; v != nil && v.ResourceFieldRef != nil && !Bounded(v.ResourceFieldRef.Divisor) {
				return fmt.Sprintf("%s.env[%d].valueFrom.resourceFieldRef.divisor", path, i)
			}
		}
		return ""
	}
	items := func(path string, d *corev1.DownwardAPIProjection) string {
		if d == nil {
			return ""
		}
		for i := range d.Items {
			if r := d.Items[i].ResourceFieldRef; r != nil && !Bounded(r.Divisor) {
				return fmt.Sprintf("%s.items[%d].resourceFieldRef.divisor", path, i)
			}
		}
		return ""
	}
	reqs := func(path string, r *corev1.ResourceRequirements) string {
		if p := list(path+".limits", r.Limits); p != "" {
			return p
		}
		return list(path+".requests", r.Requests)
	}
	for ref, c := range AllContainers(spec) {
		path := ref.Path()
		if p := reqs(path+".resources", &c.Resources); p != "" {
			return p
		}
		if p := divisors(path, c.Env); p != "" {
			return p
		}
	}
	if spec.Resources != nil {
		if p := reqs("spec.resources", spec.Resources); p != "" {
			return p
		}
	}
	if p := list("spec.overhead", spec.Overhead); p != "" {
		return p
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && !Bounded(*v.EmptyDir.SizeLimit) {
			return fmt.Sprintf("spec.volumes[%d].emptyDir.sizeLimit", i)
		}
		if d := v.DownwardAPI; d != nil {
			if p := items(fmt.Sprintf("spec.volumes[%d].downwardAPI", i), &corev1.DownwardAPIProjection{Items: d.Items}); p != "" {
				return p
			}
		}
		if pr := v.Projected; pr != nil {
			for j := range pr.Sources {
				if p := items(fmt.Sprintf("spec.volumes[%d].projected.sources[%d].downwardAPI", i, j), pr.Sources[j].DownwardAPI); p != "" {
					return p
				}
			}
		}
		if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
			r := &e.VolumeClaimTemplate.Spec.Resources
			path := fmt.Sprintf("spec.volumes[%d].ephemeral.volumeClaimTemplate.spec.resources", i)
			if p := list(path+".limits", r.Limits); p != "" {
				return p
			}
			if p := list(path+".requests", r.Requests); p != "" {
				return p
			}
		}
	}
	return ""
}

// unboundedReason is the refusal of a pod with a quantity at path that is
// not Bounded. The value is not repeated: it may be 1.5 MB of digits.
func unboundedReason(path string) string {
	return fmt.Sprintf("%s is a quantity beyond what any node holds (at most 10^%d in magnitude, with an exponent within ±%d); write it with a unit suffix, such as 8Gi",
		path, maxQuantityDigits, maxQuantityScale)
}
