// Package kubeversion is the one table of the Kubernetes minors
// sandbox-webhook supports and of the minors from which the apiserver keeps
// what it depends on. dry-run --kube-version predicts from it, the server's
// probe falls back on it, the MAP export names it, and its test holds the
// e2e version matrix (e2e/tools), the chart's kubeVersion, the Makefile and
// docs/install.md to it. A new minor is an edit here and in those.
package kubeversion

const (
	// Oldest and Newest are the minors the e2e version matrix proves:
	// the k8s.io/kubernetes e2e/tools pins is Newest, and every minor
	// from Oldest has a module e2e/tools/k8s-1.NN. --kube-version outside
	// them is refused, and the chart's kubeVersion refuses to install.
	Oldest = 33
	Newest = 37

	// PodLevelResources is the first minor whose apiserver keeps a pod's
	// spec.resources with its gates at their defaults (PodLevelResources,
	// beta and on from 1.34).
	PodLevelResources = 34
	// ImageVolumes is the first minor whose apiserver keeps image volumes
	// with its gates at their defaults (ImageVolume, on from 1.35).
	ImageVolumes = 35
	// MutatingAdmissionPolicy is the first minor that serves
	// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (GA in 1.36),
	// what the MAP export writes.
	MutatingAdmissionPolicy = 36
)
