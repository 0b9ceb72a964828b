package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// podLevelGAMinor is the first minor on which the PodLevelResources feature
// gate is on by default (beta in 1.34).
const podLevelGAMinor = 34

// ClusterStatus is what the server found out about the apiserver it talks
// to, shown on /status.
type ClusterStatus struct {
	// Version is the apiserver's gitVersion (GET /version).
	Version string `json:"version,omitempty"`
	// PodLevelResources is kept, dropped or unknown.
	PodLevelResources string `json:"podLevelResources"`
	// From says how: the apiserver's feature-gate metric, or its version
	// (the gate's default) when /metrics could not be read.
	From string `json:"from,omitempty"`
	// Affected names the serving policies with memory.level pod, which
	// inject no headroom while pod-level resources are dropped.
	Affected  []string  `json:"affectedPolicies,omitempty"`
	LastProbe time.Time `json:"lastProbe,omitzero"`
	Error     string    `json:"error,omitempty"`
}

// clusterProbe finds out, at start and every interval (never on the
// admission path), whether the apiserver keeps pod-level resources:
// GET /version (readable by every authenticated client) and the
// kubernetes_feature_enabled{name="PodLevelResources"} series of GET
// /metrics (one nonResourceURLs rule in the chart's ClusterRole). Without
// /metrics it falls back to the gate's default for the version.
type clusterProbe struct {
	log      logr.Logger
	client   kubernetes.Interface
	interval time.Duration
	publish  func(mutate.PodLevelResources)

	mu     sync.Mutex
	status ClusterStatus
	probed bool // the first probe finished
}

// ready fails until the first probe finished (whatever it found), so that
// no admission is answered before memory.level auto knows the cluster.
func (p *clusterProbe) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.probed {
		return errors.New("the apiserver's version and PodLevelResources gate have not been read yet")
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
	st := ClusterStatus{PodLevelResources: "unknown", LastProbe: time.Now().UTC()}
	var level mutate.PodLevelResources
	v, err := p.client.Discovery().ServerVersion()
	if err != nil {
		st.Error = fmt.Sprintf("reading /version: %v", err)
	} else {
		st.Version = v.GitVersion
		var raw []byte
		merr := errors.New("no REST client")
		if rc := p.client.Discovery().RESTClient(); rc != nil {
			raw, merr = rc.Get().AbsPath("/metrics").DoRaw(ctx)
		}
		enabled, found := false, false
		if merr == nil {
			enabled, found = featureEnabled(raw, "PodLevelResources")
		}
		switch {
		case found:
			st.From = "metrics"
			level = mutate.PodLevelDropped
			if enabled {
				level = mutate.PodLevelKept
			}
		default:
			pv, perr := version.ParseGeneric(v.GitVersion)
			if perr != nil {
				st.Error = fmt.Sprintf("parsing version %q: %v", v.GitVersion, perr)
				break
			}
			st.From = "version"
			if merr != nil {
				st.Error = fmt.Sprintf("reading /metrics (the gate's default for the version is assumed): %v", merr)
			}
			level = mutate.PodLevelDropped
			if pv.Major() > 1 || pv.Minor() >= podLevelGAMinor {
				level = mutate.PodLevelKept
			}
		}
	}
	if level != "" {
		st.PodLevelResources = string(level)
	}
	p.mu.Lock()
	changed := p.status.PodLevelResources != st.PodLevelResources || p.status.Version != st.Version
	p.status = st
	p.mu.Unlock()
	if changed {
		p.log.Info("Probed the apiserver", "version", st.Version, "podLevelResources", st.PodLevelResources, "from", st.From, "error", st.Error)
	}
	p.publish(level)
	p.mu.Lock()
	p.probed = true
	p.mu.Unlock()
}

func (p *clusterProbe) get() ClusterStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// featureEnabled reads the kubernetes_feature_enabled series of gate from
// Prometheus text exposition.
func featureEnabled(metrics []byte, gate string) (enabled, found bool) {
	want := `name="` + gate + `"`
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kubernetes_feature_enabled{") || !strings.Contains(line, want) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64)
		if err != nil {
			continue
		}
		return f == 1, true
	}
	return false, false
}
