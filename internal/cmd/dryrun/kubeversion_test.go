package dryrun

import (
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func TestParseKubeTarget(t *testing.T) {
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
	} {
		got, err := parseKubeTarget(c.version, c.gates)
		if err != nil || got.podLevel != c.want || got.imageVolumes != c.wantImage {
			t.Errorf("parseKubeTarget(%q, %q) = %q %q, %v; want %q %q", c.version, c.gates, got.podLevel, got.imageVolumes, err, c.want, c.wantImage)
		}
	}
	for _, bad := range [][2]string{{"2.1", ""}, {"latest", ""}, {"1.33", "PodLevelResources"}, {"1.33", "PodLevelResources=maybe"}, {"1.33", "ImageVolume=perhaps"}} {
		if _, err := parseKubeTarget(bad[0], bad[1]); err == nil {
			t.Errorf("parseKubeTarget(%q, %q): no error", bad[0], bad[1])
		}
	}
}
