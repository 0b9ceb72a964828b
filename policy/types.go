// Package policy defines the SandboxPolicy file format and loads, defaults and
// validates policy files. A loaded Set is immutable and safe to share between
// goroutines; the mutation core reads it, the server swaps whole Sets on reload.
package policy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
)

const (
	// APIVersion is the only apiVersion policy documents may declare.
	APIVersion = "sandbox-webhook.io/v1alpha1"
	// Kind is the only kind policy documents may declare.
	Kind = "SandboxPolicy"
	// TestKind is the kind of a policy test file (kubectl-sandbox_webhook
	// test). Kept beside its policies, it is skipped where they are loaded.
	TestKind = "SandboxPolicyTest"
)

// Mode selects the emptyDir medium of injected caches.
type Mode string

const (
	// ModeMemory backs caches with tmpfs (emptyDir medium: Memory).
	ModeMemory Mode = "memory"
	// ModeDisk is leak-mitigation mode: caches go to node disk, and the pod's
	// own memory-backed emptyDirs are converted to disk too.
	ModeDisk Mode = "disk"
)

// ContainerLimitAction says what a memory-mode policy does about a selected
// container's own memory limit when the container mounts one of its caches:
// the cache's tmpfs pages are charged to that container's memory cgroup, so
// they count against its limit, which the pod-level headroom does not raise.
type ContainerLimitAction string

const (
	// KeepLimits leaves the limit as the pod author set it and warns that
	// the cache counts against it (the default: a pod's limits are its
	// author's, and a raised limit is memory the scheduler never saw).
	KeepLimits ContainerLimitAction = "keep"
	// RaiseLimits raises the limit by the sizeLimits of the policy's caches
	// the container mounts, and the container's memory request with it when
	// the two are equal (a Guaranteed container stays Guaranteed), so the
	// cache takes nothing from what the processes had.
	RaiseLimits ContainerLimitAction = "raise"
)

// Enforcement says whether a policy patches pods or only reports.
type Enforcement string

const (
	// Enforce patches matching pods.
	Enforce Enforcement = "enforce"
	// Shadow computes and reports what would change and patches nothing.
	Shadow Enforcement = "shadow"
)

// ConflictAction says what happens when the pod already sets an env var.
type ConflictAction string

const (
	// Keep leaves the pod's own value and warns.
	Keep ConflictAction = "keep"
	// Override replaces the pod's own value.
	Override ConflictAction = "override"
)

// Level says where the memory headroom is written.
type Level string

const (
	// LevelPod sets pod-level resources (spec.resources), Kubernetes 1.34+.
	LevelPod Level = "pod"
	// LevelContainer sets container-level memory limits instead, for
	// clusters older than 1.34 or with the PodLevelResources gate off.
	LevelContainer Level = "container"
	// LevelAuto is pod where the apiserver keeps pod-level resources and
	// container where it drops them (as the server finds out, or as
	// dry-run --kube-version says); pod when that is unknown.
	LevelAuto Level = "auto"
)

// SandboxPolicy is one policy document.
type SandboxPolicy struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        Metadata `json:"metadata"`
	Spec            Spec     `json:"spec"`
}

// Metadata names a policy. Policies apply in name order.
type Metadata struct {
	Name string `json:"name"`
}

// Spec is what a policy matches and what it injects.
type Spec struct {
	// Enforcement is enforce (default) or shadow.
	Enforcement Enforcement `json:"enforcement,omitempty"`
	// Mode is memory (default) or disk; --leak-mitigation can force it.
	Mode Mode `json:"mode,omitempty"`
	// Match selects the pods the policy applies to.
	Match Match `json:"match"`
	// Containers selects which containers receive mounts and env.
	Containers ContainerSelector `json:"containers,omitempty"`
	// Caches are emptyDir scratch volumes.
	Caches []Cache `json:"caches,omitempty"`
	// KeepMemoryVolumes lists the pod's own memory-backed emptyDirs that
	// disk mode must leave on tmpfs (for example /dev/shm).
	KeepMemoryVolumes []VolumeRef `json:"keepMemoryVolumes,omitempty"`
	// Env are environment variables set in selected containers.
	Env []EnvVar `json:"env,omitempty"`
	// Memory is the pod-level memory headroom.
	Memory *Memory `json:"memory,omitempty"`
	// ContainerLimits is what a memory-mode policy does about a selected
	// container's own memory limit when the container mounts its caches:
	// keep (the default) or raise.
	ContainerLimits ContainerLimitAction `json:"containerLimits,omitempty"`
	// Assets are read-only data mounts.
	Assets []Asset `json:"assets,omitempty"`
	// Shm is a memory-backed /dev/shm of a given size for the selected
	// containers, in either mode.
	Shm *Shm `json:"shm,omitempty"`
	// Disk is the sandbox's ephemeral-storage budget.
	Disk *Disk `json:"disk,omitempty"`
	// Runtime is where the sandbox runs: its RuntimeClass and the node
	// pool's tolerations and nodeSelector.
	Runtime *Runtime `json:"runtime,omitempty"`
	// ImageMirrors rewrite the pod's images to pull-through mirrors; the
	// first rule whose from matches an image rewrites it.
	ImageMirrors []ImageMirror `json:"imageMirrors,omitempty"`
}

// Runtime places a sandbox: a RuntimeClass (gVisor, Kata) and the node
// pool's tolerations and nodeSelector, set alike for every sandbox the
// policy selects.
type Runtime struct {
	// ClassName is the pod's runtimeClassName, such as gvisor.
	ClassName string `json:"className,omitempty"`
	// Tolerations are added to the pod's own, each unless the pod has an
	// equal one.
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// NodeSelector entries are set in the pod's nodeSelector.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// OnConflict is what happens when the pod names another
	// runtimeClassName, or another value for a nodeSelector key: keep
	// (default) leaves the pod's own, override replaces it; both warn.
	OnConflict ConflictAction `json:"onConflict,omitempty"`
}

// Toleration is a pod toleration (core/v1 Toleration's fields).
type Toleration struct {
	Key string `json:"key,omitempty"`
	// Operator is Equal (default) or Exists.
	Operator corev1.TolerationOperator `json:"operator,omitempty"`
	Value    string                    `json:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule, NoExecute or empty (all).
	Effect corev1.TaintEffect `json:"effect,omitempty"`
	// TolerationSeconds, with effect NoExecute only, bounds how long the
	// pod stays on a node once the taint appears.
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// ImageMirror rewrites the images under a registry or repository prefix to
// a mirror. Images are compared as the container runtime names them: busybox
// is docker.io/library/busybox. Tags and digests are kept.
type ImageMirror struct {
	// From is a registry (docker.io, ghcr.io) or a repository prefix
	// (docker.io/library, ghcr.io/org).
	From string `json:"from"`
	// To is the mirror's registry and path, such as
	// mirror.example.com/dockerhub. No rule's from may match it, so a
	// rewritten image is never rewritten again.
	To string `json:"to"`
}

// ShmPath is where Shm is mounted.
const ShmPath = "/dev/shm"

// Shm is a memory-backed emptyDir at /dev/shm: without one a container's
// /dev/shm is the runtime's 64 MiB, and Kubernetes has no other setting for
// it.
type Shm struct {
	// Name is the pod volume's name; default dshm.
	Name string `json:"name,omitempty"`
	// SizeLimit is the size of /dev/shm, such as 1Gi.
	SizeLimit string `json:"sizeLimit"`
}

// Disk is a sandbox's ephemeral-storage budget: its writable layers, logs
// and disk-backed emptyDirs (disk mode's caches included) together. The
// first selected app container carries it, as its ephemeral-storage request
// and limit; the kubelet evicts the pod once the pod's usage passes the sum
// of its containers' limits, which is then the budget.
type Disk struct {
	// Limit is the budget: past it the kubelet evicts the pod.
	Limit string `json:"limit"`
	// Request is what the scheduler reserves on a node's ephemeral
	// storage; default the limit.
	Request string `json:"request,omitempty"`
}

// Match selects pods. Every set field must match; an empty Match selects
// nothing, so a policy must say what it is for.
//
// Any lets one policy serve a fleet whose frameworks mark their pods with
// different label keys, which one label selector cannot express: the pod
// must then also match at least one of the blocks.
type Match struct {
	// Namespaces are namespace names or globs (path.Match syntax).
	Namespaces []string `json:"namespaces,omitempty"`
	// ExcludeNamespaces are names or globs that never match.
	ExcludeNamespaces []string `json:"excludeNamespaces,omitempty"`
	// NamespaceSelector matches the namespace's labels.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector matches the pod's labels.
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// ExcludePodSelector: pods whose labels match it never match.
	ExcludePodSelector *metav1.LabelSelector `json:"excludePodSelector,omitempty"`
	// Any, when set, also requires the pod to match at least one of these
	// blocks (tried in order; the first that matches is reported).
	Any []MatchBlock `json:"any,omitempty"`
	// OptOut, when set, lets a pod skip the policy with a label or an
	// annotation. Without it pods cannot opt out.
	OptOut *OptOut `json:"optOut,omitempty"`
}

// MatchBlock is one alternative of Match.Any. Every set field must match,
// as in Match; a block must say what it is for (namespaces,
// namespaceSelector and/or podSelector).
type MatchBlock struct {
	Namespaces         []string              `json:"namespaces,omitempty"`
	ExcludeNamespaces  []string              `json:"excludeNamespaces,omitempty"`
	NamespaceSelector  *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	PodSelector        *metav1.LabelSelector `json:"podSelector,omitempty"`
	ExcludePodSelector *metav1.LabelSelector `json:"excludePodSelector,omitempty"`
}

// OptOut names the label and/or annotation that, set to "true" on a pod,
// skips the policy.
type OptOut struct {
	Label      string `json:"label,omitempty"`
	Annotation string `json:"annotation,omitempty"`
}

// ContainerSelector selects containers by name glob. Defaults: every
// container, init container and native sidecar.
type ContainerSelector struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// InitContainers includes init containers (and native sidecars);
	// default true.
	InitContainers *bool `json:"initContainers,omitempty"`
}

// Cache is an emptyDir scratch volume mounted into selected containers.
type Cache struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	// SizeLimit is a quantity such as 1Gi; empty means no limit.
	SizeLimit string `json:"sizeLimit,omitempty"`
}

// VolumeRef names a pod volume by name or by a mountPath it is mounted at.
type VolumeRef struct {
	Name      string `json:"name,omitempty"`
	MountPath string `json:"mountPath,omitempty"`
}

// EnvVar is an environment variable to set, or with position an entry to
// add to a list variable such as PATH.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// OnConflict is what happens when a container sets the variable
	// itself: keep (default) or override. Not with position.
	OnConflict ConflictAction `json:"onConflict,omitempty"`
	// Position, prepend or append, adds value as one entry of the
	// container's own list (PATH, PYTHONPATH), once: an entry already in
	// that place is not added again.
	Position EnvPosition `json:"position,omitempty"`
	// Separator joins the entries; default ":".
	Separator string `json:"separator,omitempty"`
	// IfUnset is the list that value is added to in a container that does
	// not set the variable: the image's own value, which the pod does not
	// show. Without it such a container is left alone, with a warning.
	IfUnset string `json:"ifUnset,omitempty"`
}

// EnvPosition says where an env entry is added to a list variable.
type EnvPosition string

const (
	// Prepend puts the entry first: it wins a PATH lookup.
	Prepend EnvPosition = "prepend"
	// Append puts the entry last.
	Append EnvPosition = "append"
)

// Memory is a pod-level memory headroom.
type Memory struct {
	// Limit is the pod-level resources.limits.memory to set (for example
	// 8Gi). It is raised to the largest container limit and to the pod
	// request when those are higher.
	Limit string `json:"limit"`
	// Request is the minimum pod-level resources.requests.memory. The pod
	// request is always set explicitly (else the apiserver defaults it to the
	// limit) to max(Request, effective container requests). Default 0.
	Request string `json:"request,omitempty"`
	// Level is pod (default), container or auto.
	Level Level `json:"level,omitempty"`
}

// Asset is a read-only data mount.
type Asset struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	// HostPath is a directory on the node.
	HostPath *HostPathSource `json:"hostPath,omitempty"`
	// Image is an OCI image volume; used instead of HostPath in namespaces
	// whose Pod Security level forbids hostPath volumes, or alone.
	Image *ImageSource `json:"image,omitempty"`
	// ImageForRuntimeClasses are the RuntimeClasses under which the asset
	// is the image volume even where hostPath is allowed: runtimes that
	// refuse hostPath (GKE Sandbox's gVisor). Needs both sources.
	ImageForRuntimeClasses []string `json:"imageForRuntimeClasses,omitempty"`
}

// HostPathSource is a node directory.
type HostPathSource struct {
	Path string `json:"path"`
	// Type is Directory (default) so a missing pre-stage fails pod start.
	Type string `json:"type,omitempty"`
}

// ImageSource is an OCI image volume source.
type ImageSource struct {
	Reference  string `json:"reference"`
	PullPolicy string `json:"pullPolicy,omitempty"`
}

// Policy is a loaded, defaulted and validated SandboxPolicy with everything
// the mutation core needs compiled once.
type Policy struct {
	SandboxPolicy
	// Source is "file" or "file#N" for the Nth document of a file.
	Source string
	// Hash is a short content hash of the defaulted spec.
	Hash string

	NamespaceSelector  labels.Selector // nil when unset
	PodSelector        labels.Selector // nil when unset
	ExcludePodSelector labels.Selector // nil when unset
	// Any[i] holds the compiled selectors of Spec.Match.Any[i].
	Any []Selectors

	// CacheSizes[i] is Spec.Caches[i].SizeLimit parsed; nil when unset.
	CacheSizes []*resource.Quantity
	// MemoryLimit and MemoryRequest are Spec.Memory parsed (zero when unset).
	MemoryLimit, MemoryRequest resource.Quantity
	// ShmSize is Spec.Shm.SizeLimit parsed; nil without Shm.
	ShmSize *resource.Quantity
	// DiskLimit and DiskRequest are Spec.Disk parsed (zero when unset).
	DiskLimit, DiskRequest resource.Quantity
	// Mirrors are Spec.ImageMirrors as rewrite rules.
	Mirrors []imageref.Rule
}

// Selectors are the compiled label selectors of one match.any block; each
// is nil when unset.
type Selectors struct {
	NamespaceSelector, PodSelector, ExcludePodSelector labels.Selector
}

// Name returns the policy's name.
func (p *Policy) Name() string { return p.Metadata.Name }

// Set is an ordered, immutable collection of policies.
type Set struct {
	// Policies in application order (by name).
	Policies []*Policy
	// Hash identifies the whole set.
	Hash string
}
