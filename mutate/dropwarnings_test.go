package mutate_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// The warnings that tell a pod author the cluster dropped what a policy
// asked for carry the fix at their end; the apiserver (and the core, to
// match it) cuts a warning to 256 runes. With a policy name of the longest
// DNS label and the product's asset, each must reach kubectl whole.
func TestClusterDropWarningsFit(t *testing.T) {
	name := strings.Repeat("p", 63)
	header := func(kind string) string {
		return header + "metadata: {name: " + name + "}\nspec:\n  match:\n    podSelector: {matchLabels: {app: sandbox}}\n" + kind
	}
	cases := []struct {
		policy string
		ns     mutate.Namespace
		opts   mutate.Options
		reason string
	}{
		{header("  memory: {limit: 8Gi, level: pod}\n"), mutate.Namespace{Name: "sandboxes"},
			mutate.Options{PodLevelResources: mutate.PodLevelDropped}, mutate.PodLevelDroppedReason},
		{header("  assets:\n  - name: rebench-v2\n    mountPath: /opt/rebench-v2\n    image: {reference: registry.example/rebench:v2}\n"),
			mutate.Namespace{Name: "sandboxes", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}},
			mutate.Options{ImageVolumes: mutate.ImageVolumesDropped}, mutate.ImageVolumeDroppedReason},
	}
	for _, c := range cases {
		res := mutate.Pod(testkit.SandboxPod("", "p"), c.ns, parseSet(t, c.policy), c.opts)
		if len(res.Warnings) != 1 {
			t.Fatalf("warnings %q; want one", res.Warnings)
		}
		w := res.Warnings[0]
		if !strings.HasSuffix(w, c.reason) || utf8.RuneCountInString(w) > 256 {
			t.Errorf("warning of %d runes, cut or without its reason at the end:\n%s", utf8.RuneCountInString(w), w)
		}
	}
}
