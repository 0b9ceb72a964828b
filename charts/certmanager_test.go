package charts

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
)

// TestCertManagerModeNeedsCertManager: installing the default cert-manager
// mode into a cluster whose discovery has no cert-manager Certificate fails
// with the chart's message naming the other modes; helm template, which has
// no cluster, and a cluster with cert-manager render.
func TestCertManagerModeNeedsCertManager(t *testing.T) {
	render := func(apiVersions ...string) error {
		install := action.NewInstall(action.NewConfiguration())
		install.DryRunStrategy = action.DryRunClient
		install.Replace = true
		install.ReleaseName = releaseName
		install.Namespace = namespace
		install.KubeVersion = kubeVersion(t)
		install.APIVersions = apiVersions
		_, err := install.Run(loadChart(t), map[string]any{})
		return err
	}
	// What a cluster's discovery lists: group/version and group/version/kind.
	cluster := []string{"v1", "v1/Pod", "apps/v1", "apps/v1/Deployment"}
	err := render(cluster...)
	if err == nil {
		t.Fatal("rendered the cert-manager mode for a cluster without cert-manager")
	}
	for _, want := range []string{"no cert-manager.io/v1 Certificate", "certificates.mode=selfManaged", "certificates.mode=existingSecret"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if err := render(append(cluster, "cert-manager.io/v1", "cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer")...); err != nil {
		t.Errorf("a cluster with cert-manager: %v", err)
	}
	if err := render(); err != nil {
		t.Errorf("helm template (no cluster): %v", err)
	}
}
