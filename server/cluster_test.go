package server

import "testing"

func TestFeatureEnabled(t *testing.T) {
	metrics := []byte(`# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="InPlacePodLevelResourcesVerticalScaling",stage="ALPHA"} 0
kubernetes_feature_enabled{name="PodLevelResources",stage="BETA"} 1
kubernetes_feature_enabled{name="ImageVolume",stage="BETA"} 0
`)
	for _, c := range []struct {
		gate           string
		enabled, found bool
	}{
		{"PodLevelResources", true, true},
		{"ImageVolume", false, true},
		{"NoSuchGate", false, false},
	} {
		if e, f := featureEnabled(metrics, c.gate); e != c.enabled || f != c.found {
			t.Errorf("featureEnabled(%s) = %v, %v; want %v, %v", c.gate, e, f, c.enabled, c.found)
		}
	}
}
