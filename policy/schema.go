package policy

import corev1 "k8s.io/api/core/v1"

// SchemaID names the published JSON Schema of a SandboxPolicy document,
// sandboxpolicy.schema.json, which schema_test.go generates from the types.
const SchemaID = "https://raw.githubusercontent.com/sandbox-webhook/sandbox-webhook/main/policy/sandboxpolicy.schema.json"

// The allowed values of the string types with a fixed set: validation and
// the schema generator (schema_test.go) read the same lists, so they cannot
// disagree.
var (
	modes           = []Mode{ModeMemory, ModeDisk}
	enforcements    = []Enforcement{Enforce, Shadow}
	conflictActions = []ConflictAction{Keep, Override}
	levels          = []Level{LevelPod, LevelContainer, LevelAuto}
	limitActions    = []ContainerLimitAction{KeepLimits, RaiseLimits}
	envPositions    = []EnvPosition{Prepend, Append}
	operators       = []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}
	taintEffects    = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
)
