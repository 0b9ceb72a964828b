package charts

import (
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/charts/render"
)

// TestCertManagerModeNeedsCertManager: installing the default cert-manager
// mode into a cluster whose discovery has no cert-manager Certificate fails
// with the chart's message naming the other modes; helm template, which has
// no cluster, and a cluster with cert-manager render.
func TestCertManagerModeNeedsCertManager(t *testing.T) {
	renderOn := func(apiVersions ...string) error {
		_, err := render.Render(t.Context(), loadChart(t), render.Options{
			Release: releaseName, Namespace: namespace, KubeVersion: kubeVersion(t), APIVersions: apiVersions,
		}, map[string]any{})
		return err
	}
	// What a cluster's discovery lists: group/version and group/version/kind.
	cluster := []string{"v1", "v1/Pod", "apps/v1", "apps/v1/Deployment"}
	err := renderOn(cluster...)
	if err == nil {
		t.Fatal("rendered the cert-manager mode for a cluster without cert-manager")
	}
	for _, want := range []string{"no cert-manager.io/v1 Certificate", "certificates.mode=selfManaged", "certificates.mode=existingSecret"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if err := renderOn(append(cluster, "cert-manager.io/v1", "cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer")...); err != nil {
		t.Errorf("a cluster with cert-manager: %v", err)
	}
	if err := renderOn(); err != nil {
		t.Errorf("helm template (no cluster): %v", err)
	}
}
