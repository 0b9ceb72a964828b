// Package mutate is the pure mutation core shared by the webhook and the
// dry-run CLI: (pod, namespace facts, policies, overrides) → mutated pod, the
// decisions taken and the warnings to show. It performs no I/O.
package mutate

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// StatusAnnotation records, on every mutated pod, the policies applied (name
// and content hash), their mode, and what was injected or skipped.
const StatusAnnotation = "sandbox-webhook.io/status"

// LeakMitigation is the server/CLI-wide mode override.
type LeakMitigation string

const (
	// LeakMitigationPolicy lets each policy choose its mode (the default).
	LeakMitigationPolicy LeakMitigation = "policy"
	// LeakMitigationOn forces disk mode for every policy.
	LeakMitigationOn LeakMitigation = "on"
	// LeakMitigationOff forces memory mode for every policy.
	LeakMitigationOff LeakMitigation = "off"
)

// ParseLeakMitigation parses on, off or policy; "" is policy.
func ParseLeakMitigation(s string) (LeakMitigation, bool) {
	switch l := LeakMitigation(s); l {
	case LeakMitigationPolicy, LeakMitigationOn, LeakMitigationOff:
		return l, true
	case "":
		return LeakMitigationPolicy, true
	}
	return "", false
}

// Set parses on, off or policy. With String and Type it makes a
// LeakMitigation the value of every command's --leak-mitigation flag (a
// pflag.Value), so that a bad value is refused while the flags are parsed,
// whether it came from the command line, the environment or a config file.
func (l *LeakMitigation) Set(s string) error {
	v, ok := ParseLeakMitigation(s)
	if !ok {
		return errors.New("must be on, off or policy")
	}
	*l = v
	return nil
}

// String returns the mode; "" when a flag was left unset with no default.
func (l *LeakMitigation) String() string { return string(*l) }

// Type names the flag's value in --help.
func (l *LeakMitigation) Type() string { return "string" }

// Mode is the mode p runs in under the override: on forces disk, off
// forces memory, policy (or "") keeps the policy's own.
func (l LeakMitigation) Mode(p *policy.Policy) policy.Mode {
	switch l {
	case LeakMitigationOn:
		return policy.ModeDisk
	case LeakMitigationOff:
		return policy.ModeMemory
	}
	return p.Spec.Mode
}

// Namespace is what the core knows about the pod's namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// PodLevelResources is what the target apiserver does with a pod's
// pod-level resources (spec.resources): before Kubernetes 1.34, or with the
// PodLevelResources feature gate off, it drops them without an error.
type PodLevelResources string

const (
	// PodLevelUnknown: not known; treated as kept (the default from 1.34).
	PodLevelUnknown PodLevelResources = ""
	// PodLevelKept: the apiserver stores spec.resources.
	PodLevelKept PodLevelResources = "kept"
	// PodLevelDropped: the apiserver drops spec.resources.
	PodLevelDropped PodLevelResources = "dropped"
)

// ImageVolumes is what the target apiserver does with image volumes
// (volumes[].image, an asset's image source): before Kubernetes 1.35, or
// with the ImageVolume feature gate off, it drops them and their mounts
// without an error.
type ImageVolumes string

const (
	// ImageVolumesUnknown: not known; treated as kept (the default from 1.35).
	ImageVolumesUnknown ImageVolumes = ""
	// ImageVolumesKept: the apiserver stores image volumes.
	ImageVolumesKept ImageVolumes = "kept"
	// ImageVolumesDropped: the apiserver drops image volumes and their mounts.
	ImageVolumesDropped ImageVolumes = "dropped"
)

// Options are settings that apply to every policy.
type Options struct {
	// PodLevelResources is what the target apiserver does with pod-level
	// resources: memory.level auto follows it, and a level pod policy
	// warns where they are dropped.
	PodLevelResources PodLevelResources
	// ImageVolumes is what the target apiserver does with image volumes:
	// where they are dropped, an asset that would get its image source is
	// skipped with a warning (a hostPath is no fallback: the image source
	// is chosen where Pod Security forbids hostPath).
	ImageVolumes ImageVolumes
	// LeakMitigation forces the mode of every policy unless "policy".
	LeakMitigation LeakMitigation
	// ExcludeNamespaces are never mutated (the webhook's own namespace).
	// kube-system is always excluded.
	ExcludeNamespaces []string
	// StatusAlways gives every pod the status annotation, one that no
	// policy changes ({"policies":[]}) and a skipped one too, so that a
	// guard after the webhook can tell a pod it answered from one it never
	// saw (serve --status-always, the chart's webhook.guard).
	StatusAlways bool
}

// PolicyResult says whether one policy matched the pod and, if not, why.
type PolicyResult struct {
	Policy      string
	Hash        string
	Matched     bool
	Reason      MatchReason // why it did not match; "" (zero) when it matched
	Enforcement policy.Enforcement
	Mode        policy.Mode // effective mode, after the override
}

// Decision is one item a matching policy applied or skipped.
type Decision struct {
	Policy string
	// Item names what was injected, e.g. "volume/uv-cache", "env/UV_LINK_MODE",
	// "memory/pod", "asset/rebench-v2", "convert/scratch".
	Item string
	// Reason is empty for applied items and says why for skipped ones.
	Reason string
	// Shadow is true for decisions of shadow policies: computed, not applied.
	Shadow bool
	// Present is true for an applied item the pod already had as the
	// policy injects it (put there by another mutator, or by an earlier
	// call): applying it changed nothing.
	Present bool
}

// Result is the outcome of Pod.
type Result struct {
	// Pod is the mutated pod. It is the input pointer, untouched, when no
	// policy changed anything; otherwise a deep copy the policies changed.
	Pod *corev1.Pod
	// Changed reports whether Pod differs from the input.
	Changed bool
	// OnlyStatus reports that the only change is the empty status
	// annotation of Options.StatusAlways: no policy changed the pod.
	OnlyStatus bool
	// PodSkipped is non-empty when the whole pod was skipped (Windows pod,
	// excluded namespace) and says why.
	PodSkipped string
	// Denied is non-empty when the pod must be refused, and says why: a
	// container mounts a policy's hostPath volume, which the pod already
	// has, other than the policy mounts it. The webhook answers it as a
	// denial; Pod is then what a pass would otherwise give.
	Denied   string
	Policies []PolicyResult
	Applied  []Decision
	Skipped  []Decision
	Warnings []string
}
