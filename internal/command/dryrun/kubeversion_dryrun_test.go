package dryrun

import (
	"fmt"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// TestDryRunKubeTarget predicts, for the target apiserver, what the webhook
// injects and what the apiserver stores: where it drops image volumes
// (before 1.35, or ImageVolume=false) an asset's image source is skipped
// with the webhook's warning, and an image volume of the pod's own is not
// stored. 1.34 and ImageVolume=false predict the same.
func TestDryRunKubeTarget(t *testing.T) {
	for _, c := range []struct {
		name   string
		pod    string
		target []string
	}{
		{"baseline-1.33", "testdata/pods/baseline-namespace.yaml", []string{"--kube-version", "1.33"}},
		{"baseline-1.34", "testdata/pods/baseline-namespace.yaml", []string{"--kube-version", "1.34"}},
		{"baseline-imagevolume-false", "testdata/pods/baseline-namespace.yaml", []string{"--feature-gates", "ImageVolume=false"}},
		{"baseline-1.34-imagevolume-true", "testdata/pods/baseline-namespace.yaml", []string{"--kube-version", "1.34", "--feature-gates", "ImageVolume=true"}},
		{"baseline-1.35", "testdata/pods/baseline-namespace.yaml", []string{"--kube-version", "1.35"}},
		{"own-image-volume-1.34", "testdata/cli/own-image-volume.yaml", []string{"--kube-version", "1.34"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"dry-run", "-f", testkit.Path(c.pod), "--namespaces", testkit.Path(golden.Namespaces),
				"--predict", "--policy", testkit.Path("examples/policies/memory")}, c.target...)
			stdout, stderr, code := commandtest.RunCLI(t, cli, "", args...)
			golden.Compare(t, "testdata/cli/kube-target-"+c.name+".golden",
				fmt.Appendf(nil, "%s--- stderr\n%sexit code: %d\n", stdout, stderr, code))
		})
	}
	for _, pair := range [][2]string{{"baseline-1.34", "baseline-imagevolume-false"}, {"baseline-1.34-imagevolume-true", "baseline-1.35"}} {
		if a, b := readGolden(t, pair[0]), readGolden(t, pair[1]); a != b {
			t.Errorf("%s and %s predict differently:\n%s\n---\n%s", pair[0], pair[1], a, b)
		}
	}
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	return string(testkit.Read(t, "testdata/cli/kube-target-"+name+".golden"))
}
