// Package charts holds the tests of the sandbox-webhook Helm chart: it renders the chart
// with the Helm SDK over a table of values and asserts on the decoded, typed objects.
// It lives beside the chart directory so `helm package` never sees it.
package charts

import (
	"bufio"
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/charts/render"
)

const (
	chartDir    = "sandbox-webhook"
	releaseName = "sandbox-webhook"
	namespace   = "sandbox-webhook-system"
)

// rendered is one render of the chart.
type rendered struct {
	manifest string
	notes    string
	objects  []runtime.Object
}

// loadChart loads the chart directory the way `helm install ./charts/sandbox-webhook` does
// (.helmignore applied).
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := render.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// renderChart renders the chart client-side, as `helm template` does, with values given
// as YAML (merged over values.yaml; the schema and the templates' checks apply).
func renderChart(t *testing.T, values string) (*rendered, error) {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatalf("test values: %v", err)
	}
	return renderValues(t, vals, releaseName, namespace)
}

// renderValues renders the chart with values as a map, for a release in ns.
func renderValues(t *testing.T, vals map[string]any, release, ns string) (*rendered, error) {
	t.Helper()
	return renderFor(t, kubeVersion(t), vals, release, ns)
}

// renderAt renders the chart with values as YAML for a cluster of version,
// and fails the test on error.
func renderAt(t *testing.T, version, values string) *rendered {
	t.Helper()
	v, err := common.ParseKubeVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatalf("test values: %v", err)
	}
	r, err := renderFor(t, v, vals, releaseName, namespace)
	if err != nil {
		t.Fatalf("render for %s: %v", version, err)
	}
	return r
}

func renderFor(t *testing.T, version *common.KubeVersion, vals map[string]any, release, ns string) (*rendered, error) {
	t.Helper()
	r, err := render.Render(t.Context(), loadChart(t), render.Options{Release: release, Namespace: ns, KubeVersion: version}, vals)
	if err != nil {
		return nil, err
	}
	if len(r.Hooks) != 0 {
		t.Errorf("the chart has %d hooks; it should have none", len(r.Hooks))
	}
	objs, err := decode(r.Manifest)
	if err != nil {
		t.Fatalf("decode rendered manifest: %v\n%s", err, r.Manifest)
	}
	return &rendered{manifest: r.Manifest, notes: r.Info.Notes, objects: objs}, nil
}

// mustRender renders and fails the test on error.
func mustRender(t *testing.T, values string) *rendered {
	t.Helper()
	r, err := renderChart(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// kubeVersion is the cluster version renders assume. Set explicitly: in a test binary
// Helm's default is v1.20, older than the chart's kubeVersion.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion("v1.36.0")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// scheme knows every kind the chart renders except the ServiceMonitor, which stays
// unstructured.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := cmv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// decode splits a multi-document manifest and decodes every document strictly: an
// unknown or misspelt field in a template is an error, not a silently dropped field.
func decode(manifest string) ([]runtime.Object, error) {
	s := newScheme()
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s,
		json.SerializerOptions{Yaml: true, Strict: true})
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if !s.Recognizes(u.GroupVersionKind()) {
			objs = append(objs, u)
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, obj)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// all returns every rendered object of type T.
func all[T runtime.Object](r *rendered) []T {
	var out []T
	for _, o := range r.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the only rendered object of type T.
func one[T runtime.Object](t *testing.T, r *rendered) T {
	t.Helper()
	objs := all[T](r)
	if len(objs) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, got %d", zero, len(objs))
	}
	return objs[0]
}

// kinds lists "Kind/name" of every rendered object, in render order.
func kinds(r *rendered) []string {
	var out []string
	for _, o := range r.objects {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			panic(err)
		}
		u := unstructured.Unstructured{Object: m}
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+u.GetName())
	}
	return out
}

// refreshGolden is set by REFRESH_GOLDEN=1 to rewrite golden files instead of comparing.
func refreshGolden() bool { return os.Getenv("REFRESH_GOLDEN") != "" }

// checkGolden compares got with testdata/name, or rewrites it under REFRESH_GOLDEN.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if refreshGolden() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with REFRESH_GOLDEN=1 to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is stale; rerun with REFRESH_GOLDEN=1 and review the diff.\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff reports the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  -%s\n  +%s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// configMaps returns the rendered ConfigMaps by name.
func configMaps(r *rendered) map[string]*corev1.ConfigMap {
	out := map[string]*corev1.ConfigMap{}
	for _, cm := range all[*corev1.ConfigMap](r) {
		out[cm.Name] = cm
	}
	return out
}

// deploymentContainer returns the webhook container of the rendered Deployment.
func deploymentContainer(t *testing.T, r *rendered) corev1.Container {
	t.Helper()
	cs := one[*appsv1.Deployment](t, r).Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, got %d", len(cs))
	}
	return cs[0]
}

// volume returns the Deployment's pod volume called name.
func volume(t *testing.T, r *rendered, name string) corev1.Volume {
	t.Helper()
	for _, v := range one[*appsv1.Deployment](t, r).Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q", name)
	return corev1.Volume{}
}

// mount returns the container's mount of the volume called name.
func mount(t *testing.T, c corev1.Container, name string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no mount of %q", name)
	return corev1.VolumeMount{}
}

// selects reports whether the label selector matches the labels.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return false
	}
	return s.Matches(labels.Set(set))
}

// equalJSON compares two values by their JSON encoding (nil and empty collapse as the
// API server would see them).
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := stdjson.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := stdjson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// hasSuffix reports whether list ends with suffix.
func hasSuffix(list, suffix []string) bool {
	return len(list) >= len(suffix) && slices.Equal(list[len(list)-len(suffix):], suffix)
}

func ptr[T any](v T) *T { return &v }
