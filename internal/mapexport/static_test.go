package mapexport

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// TestStatic: every object gets the suffix, each binding names its policy by
// the new name, nothing else changes, and the export it was given is left as
// it was.
func TestStatic(t *testing.T) {
	exported, _, err := Export(golden.Policies(t, "testdata/policies/multi"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(exported) == 0 {
		t.Fatal("nothing exported")
	}
	before := make([]Exported, len(exported))
	for i, e := range exported {
		before[i] = Exported{Sources: e.Sources, Policy: e.Policy.DeepCopy(), Binding: e.Binding.DeepCopy()}
	}
	static := Static(exported)
	if diff := cmp.Diff(before, exported); diff != "" {
		t.Fatalf("Static changed its input:\n%s", diff)
	}
	for i, e := range static {
		want := before[i]
		p, b := want.Policy.DeepCopy(), want.Binding.DeepCopy()
		p.Name += ".static.k8s.io"
		b.Name += ".static.k8s.io"
		b.Spec.PolicyName = p.Name
		if diff := cmp.Diff(Exported{Sources: want.Sources, Policy: p, Binding: b}, e); diff != "" {
			t.Errorf("static export %d (-want +got):\n%s", i, diff)
		}
	}
}
