package cli

import (
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

func TestParseKubeTarget(t *testing.T) {
	for _, c := range []struct {
		version, gates string
		want           mutate.PodLevelResources
	}{
		{"", "", mutate.PodLevelUnknown},
		{"1.33", "", mutate.PodLevelDropped},
		{"v1.33.13", "", mutate.PodLevelDropped},
		{"1.34", "", mutate.PodLevelKept},
		{"v1.36.3", "", mutate.PodLevelKept},
		{"v1.36.3", "PodLevelResources=false,InPlacePodLevelResourcesVerticalScaling=false", mutate.PodLevelDropped},
		{"1.33", "PodLevelResources=true", mutate.PodLevelKept},
		{"", "PodLevelResources=false", mutate.PodLevelDropped},
	} {
		got, err := parseKubeTarget(c.version, c.gates)
		if err != nil || got.podLevel != c.want {
			t.Errorf("parseKubeTarget(%q, %q) = %q, %v; want %q", c.version, c.gates, got.podLevel, err, c.want)
		}
	}
	for _, bad := range [][2]string{{"2.1", ""}, {"latest", ""}, {"1.33", "PodLevelResources"}, {"1.33", "PodLevelResources=maybe"}} {
		if _, err := parseKubeTarget(bad[0], bad[1]); err == nil {
			t.Errorf("parseKubeTarget(%q, %q): no error", bad[0], bad[1])
		}
	}
}
