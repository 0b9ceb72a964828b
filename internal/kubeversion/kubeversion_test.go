package kubeversion

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestEverySourceAgrees holds every place that must name the supported
// minors to this package: the e2e version matrix's modules, the chart's
// kubeVersion, the Makefile's MAP minor, the e2e harness's version and
// docs/install.md's requirements.
func TestEverySourceAgrees(t *testing.T) {
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(testkit.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	find := func(name, re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(read(name))
		if m == nil {
			t.Fatalf("%s has no line matching %s", name, re)
		}
		return m[1]
	}

	if got := find("e2e/tools/go.mod", `(?m)^\s*k8s\.io/kubernetes v1\.(\d+)\.`); got != fmt.Sprint(Newest) {
		t.Errorf("e2e/tools/go.mod pins k8s.io/kubernetes 1.%s; Newest is 1.%d", got, Newest)
	}
	if got := find("e2e/harness/version.go", `KubeVersion = "v1\.(\d+)\.`); got != fmt.Sprint(Newest) {
		t.Errorf("e2e/harness KubeVersion is 1.%s; Newest is 1.%d", got, Newest)
	}
	dirs, err := filepath.Glob(testkit.Path("e2e/tools/k8s-1.*"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, d := range dirs {
		got = append(got, filepath.Base(d))
	}
	for m := Oldest; m < Newest; m++ {
		want = append(want, fmt.Sprintf("k8s-1.%d", m))
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("e2e/tools has %v; from Oldest 1.%d below Newest 1.%d the matrix needs %v", got, Oldest, Newest, want)
	}
	if got, want := find("charts/sandbox-webhook/Chart.yaml", `(?m)^kubeVersion: "(.*)"`), fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", Oldest, Newest+1); got != want {
		t.Errorf("Chart.yaml kubeVersion is %q; want %q", got, want)
	}
	if got := find("Makefile", `(?m)^MAP_MINOR\s*:=\s*(\d+)`); got != fmt.Sprint(MutatingAdmissionPolicy) {
		t.Errorf("the Makefile's MAP_MINOR is %s; MutatingAdmissionPolicy is %d", got, MutatingAdmissionPolicy)
	}
	var minors []string
	for m := Oldest; m < Newest; m++ {
		minors = append(minors, fmt.Sprintf("1.%d", m))
	}
	claim := fmt.Sprintf("Requirements: Kubernetes %s or 1.%d,", strings.Join(minors, ", "), Newest)
	if !strings.Contains(read("docs/install.md"), claim) {
		t.Errorf("docs/install.md does not start its requirements with %q", claim)
	}
}
