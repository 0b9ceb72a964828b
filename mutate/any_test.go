package mutate_test

import (
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestMatchAny covers a policy whose pods are selected by one of several
// blocks: the block that matched is named, a pod no block selects gets every
// block's reason, and the fields of match itself still apply to every pod.
func TestMatchAny(t *testing.T) {
	set := parseSet(t, header+`metadata: {name: fleet}
spec:
  match:
    excludeNamespaces: ["rl-system"]
    any:
    - podSelector: {matchLabels: {app: sandbox}}
      excludePodSelector: {matchLabels: {component: router}}
    - podSelector: {matchExpressions: [{key: agents.x-k8s.io/sandbox-name-hash, operator: Exists}]}
    - namespaces: ["r2e-*"]
      namespaceSelector: {matchLabels: {sandboxes: enabled}}
    optOut: {label: skip}
  env: [{name: UV_LINK_MODE, value: copy}]
`)
	enabled := map[string]string{"sandboxes": "enabled"}
	for _, c := range []struct {
		name   string
		ns     mutate.Namespace
		labels map[string]string
		by     string // the block that matched; "" when none did
		reason string
	}{
		{name: "first block", ns: mutate.Namespace{Name: "rl-7"}, labels: map[string]string{"app": "sandbox"}, by: "match.any[0]"},
		{name: "second block", ns: mutate.Namespace{Name: "rl-7"}, labels: map[string]string{"agents.x-k8s.io/sandbox-name-hash": "a1b2"}, by: "match.any[1]"},
		{name: "namespace block, label-less pod", ns: mutate.Namespace{Name: "r2e-3", Labels: enabled}, by: "match.any[2]"},
		{name: "first block excludes, second selects", ns: mutate.Namespace{Name: "rl-7"},
			labels: map[string]string{"app": "sandbox", "component": "router", "agents.x-k8s.io/sandbox-name-hash": "a1b2"}, by: "match.any[1]"},
		{name: "no block", ns: mutate.Namespace{Name: "r2e-3"}, labels: map[string]string{"app": "sandbox", "component": "router"},
			reason: `no match.any block selects the pod: pod labels match match.any[0].excludePodSelector (component=router); ` +
				`pod labels do not match match.any[1].podSelector (agents.x-k8s.io/sandbox-name-hash); ` +
				`namespace labels do not match match.any[2].namespaceSelector (sandboxes=enabled)`},
		{name: "namespace not listed in the block", ns: mutate.Namespace{Name: "web", Labels: enabled},
			reason: `no match.any block selects the pod: pod labels do not match match.any[0].podSelector (app=sandbox); ` +
				`pod labels do not match match.any[1].podSelector (agents.x-k8s.io/sandbox-name-hash); ` +
				`namespace "web" is not in match.any[2].namespaces [r2e-*]`},
		{name: "match itself excludes the namespace", ns: mutate.Namespace{Name: "rl-system"}, labels: map[string]string{"app": "sandbox"},
			reason: `namespace "rl-system" is excluded by match.excludeNamespaces (rl-system)`},
		{name: "opt-out applies to every block", ns: mutate.Namespace{Name: "rl-7"}, labels: map[string]string{"app": "sandbox", "skip": "true"},
			reason: "pod opted out with label skip=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := testkit.SandboxPod("", "p")
			pod.Labels = c.labels
			res := mutate.Pod(pod, c.ns, set, mutate.Options{})
			pr := res.Policies[0]
			if got := pr.Reason.String(); got != c.reason || pr.Matched != (c.reason == "") {
				t.Errorf("matched=%v reason:\n got %q\nwant %q", pr.Matched, got, c.reason)
			}
			if got := pr.Reason.MatchedBy(); got != c.by {
				t.Errorf("MatchedBy = %q, want %q", got, c.by)
			}
			if res.Changed != pr.Matched {
				t.Errorf("Changed = %v for matched = %v", res.Changed, pr.Matched)
			}
		})
	}
}
