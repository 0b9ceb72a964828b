package charts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestDefaultPoliciesAreValid loads the chart's default policies the way the server loads
// the mounted ConfigMap (policy.Load on a directory of its keys), so the chart cannot ship
// a policy the server would reject.
func TestDefaultPoliciesAreValid(t *testing.T) {
	data := configMaps(mustRender(t, ""))[fullname+"-policies"].Data
	if len(data) == 0 {
		t.Fatal("no default policies")
	}
	dir := t.TempDir()
	for name, text := range data {
		if _, err := policy.Parse(name, []byte(text)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	set, err := policy.Load(dir)
	if err != nil {
		t.Fatalf("policy.Load of the rendered ConfigMap: %v", err)
	}
	if len(set.Policies) != 1 {
		t.Fatalf("want the seed policy only, got %d policies", len(set.Policies))
	}

	// The seed case.
	p := set.Policies[0]
	spec := p.Spec
	if spec.Mode != policy.ModeMemory || spec.Enforcement != policy.Enforce {
		t.Errorf("mode %q enforcement %q, want memory/enforce", spec.Mode, spec.Enforcement)
	}
	if p.PodSelector == nil || p.PodSelector.String() != "app=sandbox" {
		t.Errorf("pod selector %v, want app=sandbox (the chart's default objectSelector)", p.PodSelector)
	}
	if len(spec.Caches) != 1 || spec.Caches[0].MountPath != "/root/.cache/uv" ||
		p.CacheSizes[0] == nil || p.CacheSizes[0].Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("caches %+v, want a 1Gi cache at /root/.cache/uv", spec.Caches)
	}
	if !slices.ContainsFunc(spec.Env, func(e policy.EnvVar) bool { return e.Name == "UV_LINK_MODE" && e.Value == "copy" }) {
		t.Errorf("env %+v, want UV_LINK_MODE=copy", spec.Env)
	}
	if p.MemoryLimit.Cmp(resource.MustParse("8Gi")) != 0 {
		t.Errorf("memory limit %v, want 8Gi", p.MemoryLimit)
	}
	if len(spec.Assets) != 0 {
		t.Errorf("assets %+v enabled by default; the host path is site-specific", spec.Assets)
	}
}

// TestDefaultPolicyMatchesExample keeps the chart's default policy the example's memory
// seed policy without its asset, and checks that uncommenting the documented asset block
// gives exactly the example's hostPath asset.
func TestDefaultPolicyMatchesExample(t *testing.T) {
	text := configMaps(mustRender(t, ""))[fullname+"-policies"].Data["sandbox-seed.yaml"]
	chartPolicies, err := policy.Parse("chart", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	examplePolicies, err := policy.Parse("example", testkit.Seed(t))
	if err != nil {
		t.Fatal(err)
	}
	chartSpec, exampleSpec := chartPolicies[0].Spec, examplePolicies[0].Spec
	exampleAssets := exampleSpec.Assets
	exampleSpec.Assets = nil
	if chartPolicies[0].Name() != examplePolicies[0].Name() || !equalJSON(t, chartSpec, exampleSpec) {
		t.Errorf("the chart's default policy drifted from %s (assets aside):\nchart   %+v\nexample %+v", testkit.SeedFile, chartSpec, exampleSpec)
	}

	uncommented, ok := uncommentAssets(text)
	if !ok {
		t.Fatalf("no commented-out assets block in the default policy:\n%s", text)
	}
	withAsset, err := policy.Parse("chart-with-asset", []byte(uncommented))
	if err != nil {
		t.Fatalf("the documented asset block does not parse once uncommented: %v\n%s", err, uncommented)
	}
	got := withAsset[0].Spec.Assets
	if len(got) != 1 || len(exampleAssets) == 0 || got[0].MountPath != "/opt/rebench-v2" ||
		got[0].HostPath == nil || exampleAssets[0].HostPath == nil || got[0].HostPath.Path != exampleAssets[0].HostPath.Path {
		t.Errorf("uncommented assets %+v, want the example's hostPath asset %+v", got, exampleAssets)
	}
}

// uncommentAssets removes the "# " of the commented-out `assets:` block at the end of a
// policy, as a user enabling it would.
func uncommentAssets(text string) (string, bool) {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(trimmed)]
		if trimmed == "# assets:" {
			in = true
		}
		if in && strings.HasPrefix(trimmed, "#") {
			lines[i] = indent + strings.TrimPrefix(strings.TrimPrefix(trimmed, "#"), " ")
		}
	}
	return strings.Join(lines, "\n"), in
}
