package mutate

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestKindsAreSpecFields: every item kind the core applies is declared by
// a field of policy.Spec, so that policy/twins_test.go's walk of the spec
// reaches it.
func TestKindsAreSpecFields(t *testing.T) {
	fields := map[string]bool{}
	st := reflect.TypeFor[policy.Spec]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	for _, k := range kinds {
		if !fields[k.field] {
			t.Errorf("kind %q is not a field of policy.Spec", k.field)
		}
	}
}
