package predict

import (
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		version, gates string
		want           mutate.PodLevelResources
		wantImage      mutate.ImageVolumes
	}{
		{"", "", mutate.PodLevelUnknown, mutate.ImageVolumesUnknown},
		{"1.33", "", mutate.PodLevelDropped, mutate.ImageVolumesDropped},
		{"v1.33.13", "", mutate.PodLevelDropped, mutate.ImageVolumesDropped},
		{"1.34", "", mutate.PodLevelKept, mutate.ImageVolumesDropped},
		{"v1.35.4", "", mutate.PodLevelKept, mutate.ImageVolumesKept},
		{"v1.36.3", "", mutate.PodLevelKept, mutate.ImageVolumesKept},
		{"v1.36.3", "PodLevelResources=false,InPlacePodLevelResourcesVerticalScaling=false", mutate.PodLevelDropped, mutate.ImageVolumesKept},
		{"1.33", "PodLevelResources=true", mutate.PodLevelKept, mutate.ImageVolumesDropped},
		{"", "PodLevelResources=false", mutate.PodLevelDropped, mutate.ImageVolumesUnknown},
		{"", "ImageVolume=false", mutate.PodLevelUnknown, mutate.ImageVolumesDropped},
		{"1.34", "ImageVolume=true", mutate.PodLevelKept, mutate.ImageVolumesKept},
		{"v1.36.3", "ImageVolume=false,PodLevelResources=false", mutate.PodLevelDropped, mutate.ImageVolumesDropped},
		{"1.37", "", mutate.PodLevelKept, mutate.ImageVolumesKept},
		{"v1.37.2", "PodLevelResources=false", mutate.PodLevelDropped, mutate.ImageVolumesKept},
		{"v1.37.2", "PodLevelResources=false,PodLevelResourcesFixDefaulting=false,PodLevelResourcesFixKubeletQOSClass=false", mutate.PodLevelDropped, mutate.ImageVolumesKept},
		{"1.36", "ImageVolumeWithDigest=true,Foo=false", mutate.PodLevelKept, mutate.ImageVolumesKept},
	} {
		got, err := ParseTarget(c.version, c.gates)
		if err != nil || got.PodLevel != c.want || got.ImageVolumes != c.wantImage {
			t.Errorf("ParseTarget(%q, %q) = %q %q, %v; want %q %q", c.version, c.gates, got.PodLevel, got.ImageVolumes, err, c.want, c.wantImage)
		}
	}
	for _, bad := range [][2]string{{"2.1", ""}, {"latest", ""}, {"1.32", ""}, {"v1.32.9", ""}, {"1.38", ""}, {"v1.38.0", ""}, {"1.33", "PodLevelResources"}, {"1.33", "PodLevelResources=maybe"}, {"1.33", "ImageVolume=perhaps"}} {
		if _, err := ParseTarget(bad[0], bad[1]); err == nil {
			t.Errorf("ParseTarget(%q, %q): no error", bad[0], bad[1])
		}
	}
	// A misspelled gate that changes what is stored is refused, naming it.
	for gates, want := range map[string]string{
		"PodLevelResource=false":  `--feature-gates "PodLevelResource=false": unknown gate "PodLevelResource"; did you mean "PodLevelResources"?`,
		"podlevelresources=false": `--feature-gates "podlevelresources=false": unknown gate "podlevelresources"; did you mean "PodLevelResources"?`,
		"ImageVolumes=false":      `--feature-gates "ImageVolumes=false": unknown gate "ImageVolumes"; did you mean "ImageVolume"?`,
	} {
		if _, err := ParseTarget("1.36", gates); err == nil || err.Error() != want {
			t.Errorf("ParseTarget(1.36, %q): %v, want %s", gates, err, want)
		}
	}
}

// TestKubeVersionWindowIsTheMatrix holds the minors --kube-version accepts to
// the e2e version matrix: the newest is e2e/tools' k8s.io/kubernetes, the
// oldest the oldest e2e/tools/k8s-1.NN module.
func TestKubeVersionWindowIsTheMatrix(t *testing.T) {
	oldest, newest := testkit.KubeMinors(t)
	if newest != newestKubeMinor {
		t.Errorf("newestKubeMinor = %d; e2e/tools pins 1.%d", newestKubeMinor, newest)
	}
	if oldest != oldestKubeMinor {
		t.Errorf("oldestKubeMinor = %d; the oldest e2e/tools/k8s-1.NN is 1.%d", oldestKubeMinor, oldest)
	}
}
