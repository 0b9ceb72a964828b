// Package render renders the Helm chart (charts/sandbox-webhook) with the
// Helm SDK, client-side as `helm template` does: the one renderer of the
// chart's own tests (package charts) and of the e2e suite's harness
// (e2e/harness/chart). It lives in the charts module, which pins the Helm
// the chart is tested with, so that the main module never depends on Helm;
// the e2e module requires this one.
package render

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Dir is the chart's directory relative to the repository root.
const Dir = "charts/sandbox-webhook"

// Load loads the chart directory dir the way `helm install ./dir` does
// (.helmignore applied).
func Load(dir string) (*chart.Chart, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return c, nil
}

// Options say what the chart is rendered for.
type Options struct {
	// Release and Namespace are the release's name and namespace.
	Release, Namespace string
	// KubeVersion is the cluster's version. Set it: in a test binary
	// Helm's default is v1.20, older than the chart's kubeVersion.
	KubeVersion *common.KubeVersion
	// APIVersions are what the cluster's discovery lists (group/version
	// and group/version/kind), as .Capabilities.APIVersions; none is
	// helm template's (no cluster).
	APIVersions []string
}

// Render renders chrt with vals merged over its values.yaml (the schema
// and the templates' checks apply), and returns the release: its manifest,
// notes and hooks. An error is Helm's own, unwrapped.
func Render(ctx context.Context, chrt *chart.Chart, o Options, vals map[string]any) (*releasev1.Release, error) {
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = o.Release
	install.Namespace = o.Namespace
	install.KubeVersion = o.KubeVersion
	install.APIVersions = o.APIVersions
	rel, err := install.RunWithContext(ctx, chrt, vals)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("rendering the chart: unexpected release type %T", rel)
	}
	return r, nil
}
