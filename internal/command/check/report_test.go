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

// TestTextReportOneLinePerItem: a drift (from the pod's status annotation,
// which whoever creates the pod may write) and a webhook's match conditions
// (CEL, often written over several lines) are printed one line each, their
// newlines escaped: neither can print a "verdict:" line of its own.
func TestTextReportOneLinePerItem(t *testing.T) {
	rep := &checkReport{
		Object: "Pod sandboxes/p",
		Webhooks: []Selection{{
			Configuration: "sandbox-webhook", Webhook: "pods.sandbox-webhook.io", Sends: true, FailurePolicy: "Fail",
			MatchConditions:     []string{"not-system: !request.userInfo.username.startsWith('system:') &&\nverdict: ok"},
			MatchConditionsNote: "evaluated for this pod: all hold",
		}},
		PolicySource:   "examples/policies/memory",
		LeakMitigation: "policy",
		Drift:          []string{"policy seed (hash abc\nverdict: ok) mutated the pod, but no current policy of that name selects it"},
		Verdict:        "drifted",
		result:         &mutate.Result{},
	}
	var b strings.Builder
	if err := writeCheckReport(&b, rep, "text"); err != nil {
		t.Fatal(err)
	}
	want := `Pod sandboxes/p:
  webhook sandbox-webhook/pods.sandbox-webhook.io: sends the pod (failurePolicy Fail)
    matchConditions (evaluated for this pod: all hold): not-system: !request.userInfo.username.startsWith('system:') &&\x0averdict: ok
  policies: examples/policies/memory (leak mitigation policy)
    no policies loaded
    unchanged
  drift: policy seed (hash abc\x0averdict: ok) mutated the pod, but no current policy of that name selects it
verdict: drifted
`
	if b.String() != want {
		t.Errorf("text report:\n%s\nwant:\n%s", b.String(), want)
	}
}
