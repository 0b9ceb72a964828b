package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

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
		gates, err := featureGates(metrics)
		if e, f := gates[c.gate]; err != nil || e != c.enabled || f != c.found {
			t.Errorf("featureGates()[%s] = %v, %v, %v; want %v, %v", c.gate, e, f, err, c.enabled, c.found)
		}
	}
}

// probeAgainst probes a fake apiserver that answers GET /version with
// gitVersion and GET /metrics with metrics (or 403 when it is nil).
func probeAgainst(t *testing.T, gitVersion string, metrics []byte) (ClusterStatus, clusterFeatures) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/version":
			_ = json.NewEncoder(w).Encode(map[string]string{"major": "1", "gitVersion": gitVersion})
		case r.URL.Path == "/metrics" && metrics != nil:
			_, _ = w.Write(metrics)
		default:
			http.Error(w, "forbidden", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var got clusterFeatures
	p := &clusterProbe{log: logr.Discard(), client: client, publish: func(f clusterFeatures) { got = f }}
	p.probe(context.Background())
	if err := p.ready(); err != nil {
		t.Errorf("not ready after a probe: %v", err)
	}
	st := p.get()
	st.LastProbe = time.Time{}
	return st, got
}

// The probe reads the PodLevelResources and ImageVolume gates from
// /metrics, and each gate's default for the version where /metrics cannot
// be read or lacks its series.
func TestClusterProbe(t *testing.T) {
	series := func(podLevel, imageVolume string) []byte {
		var b strings.Builder
		b.WriteString("# TYPE kubernetes_feature_enabled gauge\n")
		if podLevel != "" {
			b.WriteString(`kubernetes_feature_enabled{name="PodLevelResources",stage="BETA"} ` + podLevel + "\n")
		}
		if imageVolume != "" {
			b.WriteString(`kubernetes_feature_enabled{name="ImageVolume",stage="BETA"} ` + imageVolume + "\n")
		}
		return []byte(b.String())
	}
	kept := clusterFeatures{mutate.PodLevelKept, mutate.ImageVolumesKept}
	for _, c := range []struct {
		name    string
		version string
		metrics []byte
		want    ClusterStatus
		wantF   clusterFeatures
	}{
		{"1.33 gates off", "v1.33.4", series("0", "0"),
			ClusterStatus{Version: "v1.33.4", PodLevelResources: "dropped", ImageVolumes: "dropped", From: "metrics"},
			clusterFeatures{mutate.PodLevelDropped, mutate.ImageVolumesDropped}},
		{"1.34 image volumes off", "v1.34.1", series("1", "0"),
			ClusterStatus{Version: "v1.34.1", PodLevelResources: "kept", ImageVolumes: "dropped", From: "metrics"},
			clusterFeatures{mutate.PodLevelKept, mutate.ImageVolumesDropped}},
		{"1.34 image volumes on", "v1.34.1", series("1", "1"),
			ClusterStatus{Version: "v1.34.1", PodLevelResources: "kept", ImageVolumes: "kept", From: "metrics"}, kept},
		{"1.36 image volumes off", "v1.36.0", series("1", "0"),
			ClusterStatus{Version: "v1.36.0", PodLevelResources: "kept", ImageVolumes: "dropped", From: "metrics"},
			clusterFeatures{mutate.PodLevelKept, mutate.ImageVolumesDropped}},
		{"no ImageVolume series, 1.34", "v1.34.1", series("1", ""),
			ClusterStatus{Version: "v1.34.1", PodLevelResources: "kept", ImageVolumes: "dropped", From: "metrics (version for ImageVolume)"},
			clusterFeatures{mutate.PodLevelKept, mutate.ImageVolumesDropped}},
		{"no series, 1.35", "v1.35.2", series("", ""),
			ClusterStatus{Version: "v1.35.2", PodLevelResources: "kept", ImageVolumes: "kept", From: "metrics (version for PodLevelResources, ImageVolume)"}, kept},
		{"no /metrics, 1.34", "v1.34.1", nil,
			ClusterStatus{Version: "v1.34.1", PodLevelResources: "kept", ImageVolumes: "dropped", From: "version",
				Error: "reading /metrics (the gates' defaults for the version are assumed): forbidden"},
			clusterFeatures{mutate.PodLevelKept, mutate.ImageVolumesDropped}},
		{"no /metrics, 1.35", "v1.35.0", nil,
			ClusterStatus{Version: "v1.35.0", PodLevelResources: "kept", ImageVolumes: "kept", From: "version",
				Error: "reading /metrics (the gates' defaults for the version are assumed): forbidden"}, kept},
		{"no /metrics, 1.33", "v1.33.4", nil,
			ClusterStatus{Version: "v1.33.4", PodLevelResources: "dropped", ImageVolumes: "dropped", From: "version",
				Error: "reading /metrics (the gates' defaults for the version are assumed): forbidden"},
			clusterFeatures{mutate.PodLevelDropped, mutate.ImageVolumesDropped}},
		{"no /metrics, bad version", "nonsense", nil,
			ClusterStatus{Version: "nonsense", PodLevelResources: "unknown", ImageVolumes: "unknown",
				Error: `parsing version "nonsense": could not parse "nonsense" as version`}, clusterFeatures{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, f := probeAgainst(t, c.version, c.metrics)
			if diff := cmp.Diff(c.want, st); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if f != c.wantF {
				t.Errorf("published %+v, want %+v", f, c.wantF)
			}
		})
	}
}

// /status names the policies a dropping apiserver affects, and
// /readyz?verbose adds a line for each dropped feature a policy asks for.
func TestClusterNotice(t *testing.T) {
	set, err := policy.ParseSet("test.yaml", []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: assets}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  assets:
  - {name: rebench-v2, mountPath: /opt/rebench-v2, hostPath: {path: /var/lib/rebench, type: Directory}, image: {reference: registry.example/rebench:v2}}
---
apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: headroom}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  memory: {limit: 8Gi, level: pod}
  assets:
  - {name: tools, mountPath: /opt/tools, hostPath: {path: /var/lib/tools, type: Directory}}
`))
	if err != nil {
		t.Fatal(err)
	}
	ready := healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	for _, c := range []struct {
		podLevel, imageVolumes string
		wantPod, wantImage     []string
		notice                 string
	}{
		{"kept", "kept", nil, nil, ""},
		{"unknown", "unknown", nil, nil, ""},
		{"kept", "dropped", nil, []string{"assets"},
			"[!]image-volumes: the apiserver (v1.34.1) drops image volumes; policies whose assets get their image source mount nothing there: assets\n"},
		{"dropped", "dropped", []string{"headroom"}, []string{"assets"},
			"[!]pod-level-resources: the apiserver (v1.34.1) drops pod-level resources; policies with memory.level pod inject no memory headroom: headroom\n" +
				"[!]image-volumes: the apiserver (v1.34.1) drops image volumes; policies whose assets get their image source mount nothing there: assets\n"},
	} {
		s := &server{
			cluster:  &clusterProbe{status: ClusterStatus{Version: "v1.34.1", PodLevelResources: c.podLevel, ImageVolumes: c.imageVolumes}},
			reloader: &reloader{set: set},
		}
		want := ClusterStatus{Version: "v1.34.1", PodLevelResources: c.podLevel, ImageVolumes: c.imageVolumes, Affected: c.wantPod, ImageVolumeAffected: c.wantImage}
		if diff := cmp.Diff(want, s.clusterStatus()); diff != "" {
			t.Errorf("%s/%s: /status cluster (-want +got):\n%s", c.podLevel, c.imageVolumes, diff)
		}
		rec := httptest.NewRecorder()
		s.withClusterNotice(http.StripPrefix("/readyz", &ready)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?verbose", nil))
		if want := "[+]ping ok\n" + c.notice + "healthz check passed\n"; rec.Body.String() != want || rec.Code != http.StatusOK {
			t.Errorf("%s/%s: /readyz?verbose = %d\n%s\nwant 200\n%s", c.podLevel, c.imageVolumes, rec.Code, rec.Body, want)
		}
	}
}
