package release

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"sigs.k8s.io/yaml"
)

// TestChartPush packages the chart of a tagged release with `make chart`,
// pushes it with `make push-chart` to an OCI registry on loopback, and
// installs from there as a user would (helm template oci://...): the chart
// says the release's version, and its Deployment runs the image `make push`
// tags with it.
func TestChartPush(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/charts"
	helmHome := t.TempDir()
	env := append(os.Environ(), "MAKEFLAGS=", "HELM_CONFIG_HOME="+helmHome, "HELM_CACHE_HOME="+helmHome, "HELM_DATA_HOME="+helmHome)
	cmd := exec.Command("make", "push-chart", "VERSION=v1.2.3", "CHART_REPO="+repo, "PUSH_CHART_FLAGS=--plain-http", "CHART_OUT="+t.TempDir())
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make push-chart: %v\n%s", err, b)
	}
	// The release workflow signs the chart by the digest helm prints.
	if !regexp.MustCompile(`(?m)^Digest: sha256:[0-9a-f]{64}$`).Match(b) {
		t.Errorf("make push-chart printed no digest:\n%s", b)
	}
	helm := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(filepath.Join("bin", "helm"), args...)
		cmd.Env = env
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return b
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(helm("show", "chart", repo+"/sandbox-webhook", "--version", "1.2.3", "--plain-http"), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != "1.2.3" || chart.AppVersion != "v1.2.3" {
		t.Errorf("pushed chart version %q appVersion %q, want 1.2.3 and v1.2.3", chart.Version, chart.AppVersion)
	}
	manifests := string(helm("template", "sandbox-webhook", repo+"/sandbox-webhook", "--version", "1.2.3", "--plain-http",
		"--namespace", "sandbox-webhook", "--set", "certificates.mode=selfManaged"))
	if !strings.Contains(manifests, "image: \"ghcr.io/sandbox-webhook/sandbox-webhook:v1.2.3\"\n") {
		t.Errorf("the chart from the registry does not run the image tagged v1.2.3")
	}
}
