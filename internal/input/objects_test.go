package input

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestPatchBase: for pods and workloads as kubectl get -o yaml prints them
// (the apiserver's typed encoding), patchBase hands mutate.Patch the typed
// encoding, and the patch is the one diffing the object's own JSON gives,
// for every corpus pod under every example policy set.
func TestPatchBase(t *testing.T) {
	files, err := filepath.Glob(golden.Path("testdata/pods/*.yaml"))
	if err != nil || len(files) < 20 {
		t.Fatalf("corpus pods: %v, %d files", err, len(files))
	}
	changed := 0
	for _, dir := range []string{"memory", "disk", "fleet"} {
		set, err := policy.Load(golden.Path("examples/policies/" + dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			rel, err := filepath.Rel(golden.Root(), f)
			if err != nil {
				t.Fatal(err)
			}
			_, decoded := golden.Pod(t, rel)
			pod := *decoded
			pod.Namespace = "sandboxes"
			deploy := &appsv1.Deployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "sandboxes"},
				Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}},
			}
			for _, obj := range []any{&pod, deploy} {
				text, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				v, err := ParseYAML(Position{Source: f}, text)
				if err != nil {
					t.Fatal(err)
				}
				o := Classify(v.(map[string]any))
				raw, err := o.PodJSON()
				if err != nil {
					t.Fatal(err)
				}
				in := &corev1.Pod{}
				if err := json.Unmarshal(raw, in); err != nil {
					t.Fatal(err)
				}
				ns := mutate.Namespace{Name: "sandboxes", Labels: map[string]string{"kubernetes.io/metadata.name": "sandboxes"}}
				r := mutate.Pod(in, ns, set, mutate.Options{})
				base, typed := o.PatchBase(raw, in)
				if bytes.Equal(base, raw) || !typed {
					t.Errorf("%s %s (%s): patchBase kept the object's own JSON, not the typed encoding", dir, f, o.Doc["kind"])
				}
				if !r.Changed {
					continue
				}
				want, err := mutate.Patch(raw, in, r.Pod)
				if err != nil {
					t.Fatal(err)
				}
				got, err := mutate.PatchEncoded(base, typed, in, r.Pod)
				if err != nil {
					t.Fatal(err)
				}
				if viaPatch, err := mutate.Patch(base, in, r.Pod); err != nil || !reflect.DeepEqual(got, viaPatch) {
					t.Errorf("%s %s (%s): PatchEncoded differs from Patch on the same base (%v)", dir, f, o.Doc["kind"], err)
				}
				if got, err = GenericOps(got); err != nil {
					t.Fatal(err)
				}
				wantJSON, _ := json.Marshal(want)
				gotJSON, _ := json.Marshal(got)
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Errorf("%s %s (%s): patch\n%s\nwant\n%s", dir, f, o.Doc["kind"], gotJSON, wantJSON)
				}
				if len(want) > 0 {
					changed++
				}
			}
		}
	}
	if changed < 40 {
		t.Errorf("only %d objects changed: the comparison proves little", changed)
	}
}

// TestMatchJSON: matchJSON agrees with decoding the JSON and comparing.
func TestMatchJSON(t *testing.T) {
	obj := map[string]any{"a": 1.0, "b": []any{1.0, "x\"y"}, "c": map[string]any{}, "d": nil, "e": true, "f": "é"}
	doc := `{"a":1,"b":[1,"x\"y"],"c":{},"d":null,"e":true,"f":"\u00e9"}`
	cases := []struct {
		json string
		v    any
		top  bool
		want bool
	}{
		{doc, obj, false, true},
		{`{"a":1e0,"f":"é","e":true,"d":null,"c":{},"b":[1.0,"x\"y"]}`, obj, false, true},
		{`{"a":1,"b":[1,"x\"y"],"c":{},"d":null,"e":true}`, obj, false, false},
		{`{"a":1,"b":[1,"x\"y"],"c":{},"d":null,"e":true,"f":"é","g":1}`, obj, false, false},
		{`{"a":2,"b":[1,"x\"y"],"c":{},"d":null,"e":true,"f":"é"}`, obj, false, false},
		{`{"a":1,"b":[1],"c":{},"d":null,"e":true,"f":"é"}`, obj, false, false},
		{`{"a":1,"b":[1,"x\"y",2],"c":{},"d":null,"e":true,"f":"é"}`, obj, false, false},
		{`{"a":1,"b":[1,"x\"y"],"c":{},"d":false,"e":true,"f":"é"}`, obj, false, false},
		{`{"a":1,"b":[1,"x\"y"],"c":[],"d":null,"e":true,"f":"é"}`, obj, false, false},
		{`{"a":"1","b":[1,"x\"y"],"c":{},"d":null,"e":true,"f":"é"}`, obj, false, false},
		{`[]`, []any{}, false, true},
		{`[]`, []any{1.0}, false, false},
		{`{"status":{}}`, map[string]any{}, true, true},
		{`{"status":{}}`, map[string]any{}, false, false},
		{`{"status":{"phase":"Running"}}`, map[string]any{}, true, false},
		{`{"status":{}}`, map[string]any{"status": map[string]any{}}, true, true},
		{`{"a":1}x`, map[string]any{"a": 1.0}, false, false},
		{`{"a":1`, map[string]any{"a": 1.0}, false, false},
	}
	for _, c := range cases {
		rest, ok := matchJSON([]byte(c.json), c.v, c.top)
		if got := ok && len(rest) == 0; got != c.want {
			t.Errorf("matchJSON(%s, %v, top %v) = %v, want %v", c.json, c.v, c.top, got, c.want)
		}
	}
}
