package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"

	"github.com/sandbox-webhook/sandbox-webhook/charts/render"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestKubeVersionIsTheTestedRange holds the chart's kubeVersion to the minors
// the version matrix proves: an install on an older or a newer cluster fails
// at `helm install` with Helm's own message instead of running untested.
func TestKubeVersionIsTheTestedRange(t *testing.T) {
	oldest, newest := testkit.KubeMinors(t)
	want := fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", oldest, newest+1)
	if got := loadChart(t).Metadata.KubeVersion; got != want {
		t.Fatalf("Chart.yaml kubeVersion = %q; e2e/tools proves 1.%d to 1.%d, so it must be %q", got, oldest, newest, want)
	}
	data, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	if claim := fmt.Sprintf("Requirements: Kubernetes 1.%d,", oldest); !strings.Contains(string(data), claim) {
		t.Errorf("docs/install.md does not start its requirements with %q", claim)
	}

	renderOn := func(version string) error {
		v, err := common.ParseKubeVersion(version)
		if err != nil {
			t.Fatal(err)
		}
		_, err = render.Render(t.Context(), loadChart(t), render.Options{Release: releaseName, Namespace: namespace, KubeVersion: v}, map[string]any{})
		return err
	}
	for _, v := range []string{fmt.Sprintf("v1.%d.0", oldest), fmt.Sprintf("v1.%d.5-eks-2f1e2d3", oldest), "v1.36.3", fmt.Sprintf("v1.%d.2", newest), fmt.Sprintf("v1.%d.9-gke.1200", newest)} {
		if err := renderOn(v); err != nil {
			t.Errorf("kube %s: %v", v, err)
		}
	}
	for _, v := range []string{fmt.Sprintf("v1.%d.9", oldest-1), "v1.30.0", fmt.Sprintf("v1.%d.0", newest+1), fmt.Sprintf("v1.%d.0-eks-2f1e2d3", newest+1)} {
		err := renderOn(v)
		if err == nil || !strings.Contains(err.Error(), "incompatible with Kubernetes "+v) {
			t.Errorf("kube %s: err = %v; want Helm's kubeVersion refusal", v, err)
		}
	}
}
