package mapexport

// StaticSuffix is the suffix kube-apiserver requires of every object it loads
// from an AdmissionConfiguration's staticManifestsDir (manifest-based
// admission control, beta and on by default in 1.37), and refuses through
// the API: a policy loaded from disk cannot be created, changed or deleted
// by any API client.
const StaticSuffix = ".static.k8s.io"

// Static returns exported as manifests for kube-apiserver's
// staticManifestsDir: each policy and binding named with StaticSuffix, and
// each binding naming its policy by that name. Nothing else changes: the
// exported policies take no parameters (paramKind, paramRef), which static
// manifests do not allow.
func Static(exported []Exported) []Exported {
	out := make([]Exported, len(exported))
	for i, e := range exported {
		p, b := e.Policy.DeepCopy(), e.Binding.DeepCopy()
		p.Name += StaticSuffix
		b.Name += StaticSuffix
		b.Spec.PolicyName = p.Name
		out[i] = Exported{Sources: e.Sources, Policy: p, Binding: b}
	}
	return out
}
