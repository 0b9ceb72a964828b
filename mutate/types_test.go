package mutate

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

var _ pflag.Value = new(LeakMitigation)

// TestLeakMitigationFlag: as a flag value, LeakMitigation takes on, off and
// policy, refuses anything else at parse time and keeps its default.
func TestLeakMitigationFlag(t *testing.T) {
	parse := func(args ...string) (LeakMitigation, error) {
		lm := LeakMitigationPolicy
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.Var(&lm, "leak-mitigation", "on, off or policy")
		err := fs.Parse(args)
		return lm, err
	}
	for arg, want := range map[string]LeakMitigation{"on": LeakMitigationOn, "off": LeakMitigationOff, "policy": LeakMitigationPolicy} {
		if got, err := parse("--leak-mitigation=" + arg); err != nil || got != want {
			t.Errorf("--leak-mitigation=%s: %q, %v", arg, got, err)
		}
	}
	if got, err := parse(); err != nil || got != LeakMitigationPolicy {
		t.Errorf("default: %q, %v", got, err)
	}
	_, err := parse("--leak-mitigation=maybe")
	if want := `invalid argument "maybe" for "--leak-mitigation" flag: must be on, off or policy`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestLeakMitigationMode: on and off force the mode, policy and "" keep
// each policy's own.
func TestLeakMitigationMode(t *testing.T) {
	for _, own := range []policy.Mode{policy.ModeMemory, policy.ModeDisk} {
		p := &policy.Policy{SandboxPolicy: policy.SandboxPolicy{Spec: policy.Spec{Mode: own}}}
		for lm, want := range map[LeakMitigation]policy.Mode{
			LeakMitigationOn: policy.ModeDisk, LeakMitigationOff: policy.ModeMemory, LeakMitigationPolicy: own, "": own,
		} {
			if got := lm.Mode(p); got != want {
				t.Errorf("%q over %s: %s, want %s", lm, own, got, want)
			}
		}
	}
}
