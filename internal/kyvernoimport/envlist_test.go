package kyvernoimport

import (
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestListEntry reads the values that add to a container's own variable:
// only those whose result on a container that sets it to a plain value is
// the entry, the separator and exactly that value (or the reverse) become
// env entries.
func TestListEntry(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  *policy.EnvVar
	}{
		{"/opt/tools/bin:{{ element.env[?name=='PATH'].value | [0] }}", &policy.EnvVar{Name: "PATH", Value: "/opt/tools/bin", Position: policy.Prepend, Separator: ":"}},
		{"/opt/tools/bin:{{element.env[?name=='PATH'].value|[0]}}", &policy.EnvVar{Name: "PATH", Value: "/opt/tools/bin", Position: policy.Prepend, Separator: ":"}},
		{"/opt/tools/bin:{{ element.env[?name == 'PATH'] | [0].value }}", &policy.EnvVar{Name: "PATH", Value: "/opt/tools/bin", Position: policy.Prepend, Separator: ":"}},
		{"{{ element.env[?name=='PATH'].value | [0] }}:/opt/tools/bin", &policy.EnvVar{Name: "PATH", Value: "/opt/tools/bin", Position: policy.Append, Separator: ":"}},
		{`C:\tools;{{ element.env[?name=='PATH'].value | [0] }}`, &policy.EnvVar{Name: "PATH", Value: `C:\tools`, Position: policy.Prepend, Separator: ";"}},
		{"/opt/tools/bin:{{ element.env[?name=='TOOLS'].value | [0] }}", nil},                              // another variable's value
		{"/opt/tools/bin:{{ element.env[?name=='PATH'].value | [0] || '/usr/bin' }}", nil},                 // a default
		{"/opt/tools/bin:{{ element.env[?name=='PATH'].value | [0] }}:/usr/bin", nil},                      // text after it
		{"/opt/tools/bin:{{ element.env[?name==\"PATH\"].value | [0] }}", nil},                             // a field named PATH
		{"/opt/tools/bin:{{ element.env[?name=='PATH'].value | [-1] }}", nil},                              // another element
		{"/opt/tools/bin:{{ element.env[?name=='PATH'].value }}", nil},                                     // a list
		{"/a:/b:{{ element.env[?name=='PATH'].value | [0] }}", nil},                                        // two entries
		{"/opt/tools/bin{{ element.env[?name=='PATH'].value | [0] }}", nil},                                // no separator
		{":{{ element.env[?name=='PATH'].value | [0] }}", nil},                                             // no entry
		{"{{ request.object.metadata.name }}:{{ element.env[?name=='PATH'].value | [0] }}", nil},           // a variable entry
		{"/opt/tools/bin:{{ element.env[?name=='PATH'].value | [0] }}{{ element.name }}", nil},             // another expression
		{"{{ element.env[?name=='PATH'].value | [0] }}:{{ element.env[?name=='PATH'].value | [0] }}", nil}, // twice
	} {
		got, ok := listEntry("PATH", tc.value)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: read as %+v, want it left out", tc.value, got)
		case tc.want != nil && (!ok || got != *tc.want):
			t.Errorf("%s: %+v (%v), want %+v", tc.value, got, ok, *tc.want)
		}
	}
}
