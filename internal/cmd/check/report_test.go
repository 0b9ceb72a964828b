package check

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestTextReportEscapes: check -f reads the pod from a file, whose name and
// the drift it causes reach the text report; a control character in them
// is printed escaped, not to the terminal.
func TestTextReportEscapes(t *testing.T) {
	rep := &checkReport{
		Object:         "Pod sandboxes/p\x1b]0;owned\x07",
		PolicySource:   "examples/policies/memory",
		LeakMitigation: "policy",
		Drift:          []string{"annotation says\rverdict: ok"},
		Verdict:        "drifted",
		result:         &mutate.Result{},
	}
	var b strings.Builder
	if err := writeCheckReport(&b, rep, "text"); err != nil {
		t.Fatal(err)
	}
	want := `Pod sandboxes/p\x1b]0;owned\x07:
  webhook: no sandbox-webhook MutatingWebhookConfiguration is installed
  policies: examples/policies/memory (leak mitigation policy)
    no policies loaded
    unchanged
  drift: annotation says\x0dverdict: ok
verdict: drifted
`
	if b.String() != want {
		t.Errorf("text report:\n%s\nwant:\n%s", b.String(), want)
	}
}
