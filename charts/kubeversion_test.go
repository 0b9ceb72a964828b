package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
)

// oldestTestedMinor is the oldest minor of the e2e version matrix: the modules
// e2e/tools/k8s-1.NN that `make e2e-matrix` runs kube-apiserver from.
func oldestTestedMinor(t *testing.T) int {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "e2e", "tools", "k8s-1.*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no e2e/tools/k8s-1.NN modules (%v)", err)
	}
	var minors []int
	for _, d := range dirs {
		var m int
		if _, err := fmt.Sscanf(filepath.Base(d), "k8s-1.%d", &m); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		minors = append(minors, m)
	}
	return slices.Min(minors)
}

// TestKubeVersionIsTheTestedRange holds the chart's kubeVersion to the oldest
// minor the version matrix proves: an install on an older cluster fails at
// `helm install` with Helm's own message instead of running untested.
func TestKubeVersionIsTheTestedRange(t *testing.T) {
	oldest := oldestTestedMinor(t)
	want := fmt.Sprintf(">=1.%d.0-0", oldest)
	if got := loadChart(t).Metadata.KubeVersion; got != want {
		t.Fatalf("Chart.yaml kubeVersion = %q; the oldest minor e2e/tools proves is 1.%d, so it must be %q", got, oldest, want)
	}
	data, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	if claim := fmt.Sprintf("Requirements: Kubernetes 1.%d,", oldest); !strings.Contains(string(data), claim) {
		t.Errorf("docs/install.md does not start its requirements with %q", claim)
	}

	render := func(version string) error {
		v, err := common.ParseKubeVersion(version)
		if err != nil {
			t.Fatal(err)
		}
		install := action.NewInstall(action.NewConfiguration())
		install.DryRunStrategy = action.DryRunClient
		install.ReleaseName = releaseName
		install.Namespace = namespace
		install.KubeVersion = v
		_, err = install.Run(loadChart(t), map[string]any{})
		return err
	}
	for _, v := range []string{fmt.Sprintf("v1.%d.0", oldest), fmt.Sprintf("v1.%d.5-eks-2f1e2d3", oldest), "v1.36.3"} {
		if err := render(v); err != nil {
			t.Errorf("kube %s: %v", v, err)
		}
	}
	for _, v := range []string{fmt.Sprintf("v1.%d.9", oldest-1), "v1.30.0"} {
		err := render(v)
		if err == nil || !strings.Contains(err.Error(), "incompatible with Kubernetes "+v) {
			t.Errorf("kube %s: err = %v; want Helm's kubeVersion refusal", v, err)
		}
	}
}
