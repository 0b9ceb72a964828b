package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/internal/kubeversion"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// ClusterStatus is what the server found out about the apiserver it talks
// to, shown on /status.
type ClusterStatus struct {
	// Version is the apiserver's gitVersion (GET /version).
	Version string `json:"version,omitempty"`
	// PodLevelResources is kept, dropped or unknown.
	PodLevelResources string `json:"podLevelResources"`
	// ImageVolumes (an asset's image source) is kept, dropped or unknown.
	ImageVolumes string `json:"imageVolumes"`
	// From says how: the apiserver's feature-gate metric, or its version
	// (the gate's default) when /metrics could not be read; "metrics" with
	// the gates read from the version named when /metrics lacked their
	// series.
	From string `json:"from,omitempty"`
	// Affected names the serving policies with memory.level pod, which
	// inject no headroom while pod-level resources are dropped.
	Affected []string `json:"affectedPolicies,omitempty"`
	// ImageVolumeAffected names the serving policies with an asset that has
	// an image source, which may not be mounted while image volumes are
	// dropped.
	ImageVolumeAffected []string  `json:"imageVolumeAffectedPolicies,omitempty"`
	LastProbe           time.Time `json:"lastProbe,omitzero"`
	Error               string    `json:"error,omitempty"`
}

// clusterFeatures is what the apiserver does with the pod fields the
// mutation depends on, as the probe found.
type clusterFeatures struct {
	podLevel     mutate.PodLevelResources
	imageVolumes mutate.ImageVolumes
}

// clusterProbe finds out, at start and every interval (never on the
// admission path), whether the apiserver keeps pod-level resources and
// image volumes: GET /version (readable by every authenticated client) and
// the kubernetes_feature_enabled{name="PodLevelResources"} and
// {name="ImageVolume"} series of GET /metrics (one nonResourceURLs rule in
// the chart's ClusterRole). Without /metrics, or a gate's series, it falls
// back to the gate's default for the version.
type clusterProbe struct {
	log      logr.Logger
	client   kubernetes.Interface
	interval time.Duration
	publish  func(clusterFeatures)

	mu     sync.Mutex
	status ClusterStatus
	probed atomic.Bool // the first probe finished
}

// ready fails until the first probe finished (whatever it found), so that
// no admission is answered before memory.level auto knows the cluster.
func (p *clusterProbe) ready() error {
	if !p.probed.Load() {
		return errors.New("the apiserver's version and feature gates (PodLevelResources, ImageVolume) have not been read yet")
	}
	return nil
}

func (p *clusterProbe) run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *clusterProbe) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st := ClusterStatus{LastProbe: time.Now().UTC()}
	var f clusterFeatures
	v, err := p.client.Discovery().ServerVersion()
	if err != nil {
		st.Error = fmt.Sprintf("reading /version: %v", err)
	} else {
		st.Version = v.GitVersion
		var gates map[string]bool
		merr := errors.New("no REST client")
		if rc := p.client.Discovery().RESTClient(); rc != nil {
			var raw []byte
			if raw, merr = rc.Get().AbsPath("/metrics").DoRaw(ctx); merr == nil {
				gates, merr = featureGates(raw)
			}
		}
		pv, perr := version.ParseGeneric(v.GitVersion)
		// kept reads gate from /metrics, else from the version's default.
		var fromVersion []string
		kept := func(gate string, defaultMinor uint) (kept, known bool) {
			if enabled, found := gates[gate]; found {
				return enabled, true
			}
			if perr != nil {
				return false, false
			}
			fromVersion = append(fromVersion, gate)
			return pv.Major() > 1 || pv.Minor() >= defaultMinor, true
		}
		if k, ok := kept("PodLevelResources", kubeversion.PodLevelResources); ok {
			f.podLevel = mutate.PodLevelDropped
			if k {
				f.podLevel = mutate.PodLevelKept
			}
		}
		if k, ok := kept("ImageVolume", kubeversion.ImageVolumes); ok {
			f.imageVolumes = mutate.ImageVolumesDropped
			if k {
				f.imageVolumes = mutate.ImageVolumesKept
			}
		}
		switch {
		case merr != nil && len(fromVersion) > 0:
			st.From = "version"
			st.Error = fmt.Sprintf("reading /metrics (the gates' defaults for the version are assumed): %v", merr)
		case len(fromVersion) > 0:
			st.From = "metrics (version for " + strings.Join(fromVersion, ", ") + ")"
		case merr == nil:
			st.From = "metrics"
		}
		if perr != nil && (f.podLevel == "" || f.imageVolumes == "") {
			st.Error = fmt.Sprintf("parsing version %q: %v", v.GitVersion, perr)
		}
	}
	st.PodLevelResources = cmp.Or(string(f.podLevel), "unknown")
	st.ImageVolumes = cmp.Or(string(f.imageVolumes), "unknown")
	p.mu.Lock()
	changed := p.status.PodLevelResources != st.PodLevelResources || p.status.ImageVolumes != st.ImageVolumes || p.status.Version != st.Version
	p.status = st
	p.mu.Unlock()
	if changed {
		p.log.Info("Probed the apiserver", "version", st.Version, "podLevelResources", st.PodLevelResources,
			"imageVolumes", st.ImageVolumes, "from", st.From, "error", st.Error)
	}
	p.publish(f)
	p.probed.Store(true)
}

func (p *clusterProbe) get() ClusterStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// featureGates reads the kubernetes_feature_enabled series from Prometheus
// text exposition: each gate's name and whether it is on.
func featureGates(metrics []byte) (map[string]bool, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(metrics))
	if err != nil {
		return nil, err
	}
	gates := map[string]bool{}
	for _, m := range families["kubernetes_feature_enabled"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" {
				gates[l.GetValue()] = m.GetGauge().GetValue() == 1
			}
		}
	}
	return gates, nil
}
