package policy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/kyvernoimport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// changed is, for every field of policy.Spec (by its path in a policy
// document), another valid value than the README reference's: what
// TestSpecFieldsHaveTheirTwins sets to see each twin of the mutation core
// react. A new field fails the test until it is given one here.
var changed = map[string]any{
	"spec.enforcement":                             "shadow",
	"spec.mode":                                    "disk",
	"spec.match.namespaces":                        []any{"evals-*"},
	"spec.match.excludeNamespaces":                 []any{"rl-other"},
	"spec.match.namespaceSelector":                 map[string]any{"matchLabels": map[string]any{"tier": "sandbox"}},
	"spec.match.podSelector":                       map[string]any{"matchLabels": map[string]any{"app": "agent"}},
	"spec.match.excludePodSelector":                map[string]any{"matchLabels": map[string]any{"component": "proxy"}},
	"spec.match.any[].namespaces":                  []any{"r2e-*"},
	"spec.match.any[].excludeNamespaces":           []any{"r2e-system"},
	"spec.match.any[].namespaceSelector":           map[string]any{"matchLabels": map[string]any{"tier": "sandbox"}},
	"spec.match.any[].podSelector":                 map[string]any{"matchLabels": map[string]any{"team": "rl"}},
	"spec.match.any[].excludePodSelector":          map[string]any{"matchLabels": map[string]any{"component": "proxy"}},
	"spec.match.optOut.label":                      "example.com/skip",
	"spec.match.optOut.annotation":                 "example.com/skip",
	"spec.containers.include":                      []any{"main"},
	"spec.containers.exclude":                      []any{"linkerd-proxy"},
	"spec.containers.initContainers":               false,
	"spec.caches[].name":                           "pip-cache",
	"spec.caches[].mountPath":                      "/root/.cache/pip",
	"spec.caches[].sizeLimit":                      "2Gi",
	"spec.keepMemoryVolumes[].name":                "scratch",
	"spec.keepMemoryVolumes[].mountPath":           "/scratch",
	"spec.env[].name":                              "PIP_NO_CACHE_DIR",
	"spec.env[].value":                             "hardlink",
	"spec.env[].onConflict":                        "override",
	"spec.memory.limit":                            "16Gi",
	"spec.memory.request":                          "1Gi",
	"spec.memory.level":                            "container",
	"spec.containerLimits":                         "raise",
	"spec.assets[].name":                           "rebench-v3",
	"spec.assets[].mountPath":                      "/opt/rebench-v3",
	"spec.assets[].hostPath.path":                  "/mnt/shared/swe-rebench-v3",
	"spec.assets[].hostPath.type":                  "File",
	"spec.assets[].image.reference":                "registry.example.com/swe-rebench-v3:pinned",
	"spec.assets[].image.pullPolicy":               "Always",
	"spec.shm.name":                                "shm",
	"spec.shm.sizeLimit":                           "4Gi",
	"spec.disk.limit":                              "40Gi",
	"spec.disk.request":                            "10Gi",
	"spec.env[].position":                          "append",
	"spec.env[].separator":                         ";",
	"spec.env[].ifUnset":                           "/usr/bin:/bin",
	"spec.assets[].imageForRuntimeClasses":         []any{"kata"},
	"spec.runtime.className":                       "kata",
	"spec.runtime.tolerations[].key":               "sandbox.example.com/kata",
	"spec.runtime.tolerations[].operator":          "Exists",
	"spec.runtime.tolerations[].value":             "kata",
	"spec.runtime.tolerations[].effect":            "NoExecute",
	"spec.runtime.tolerations[].tolerationSeconds": 60,
	"spec.runtime.nodeSelector":                    map[string]any{"pool": "kata"},
	"spec.runtime.onConflict":                      "override",
	"spec.imageMirrors[].from":                     "ghcr.io",
	"spec.imageMirrors[].to":                       "mirror.example.com/ghcr",
}

// TestSpecFieldsHaveTheirTwins walks policy.Spec and holds every field to
// what the format promises besides the mutation core: the README's policy
// reference shows it, both JSON schemas (the policy's and the chart's copy)
// know it, check's drift sees a change of it (the policy hash), the MAP
// export either exports it (its output changes) or refuses it by name, and
// the Kyverno importer either converts a Kyverno rule into it (in the
// testdata/kyverno corpus) or names it in kyvernoimport.NotImported.
func TestSpecFieldsHaveTheirTwins(t *testing.T) {
	fields := specFields(reflect.TypeFor[policy.Spec](), "spec")
	if len(fields) < 30 {
		t.Fatalf("the walk found %d fields of policy.Spec: %v", len(fields), fields)
	}
	for f := range changed {
		if !slices.Contains(fields, f) {
			t.Errorf("changed names %s, which policy.Spec does not have", f)
		}
	}
	reference := readmeReference(t)
	schemas := map[string]map[string]any{
		"policy/sandboxpolicy.schema.json": readSchema(t, "policy/sandboxpolicy.schema.json", ""),
		"charts/sandbox-webhook/values.schema.json": readSchema(t, "charts/sandbox-webhook/values.schema.json",
			"#/definitions/sandboxPolicy"),
	}
	imported := importedFields(t)
	base := exportable(reference)
	baseSet := parse(t, base)
	baseMAP, _ := export(t, baseSet)

	for _, f := range fields {
		t.Run(f, func(t *testing.T) {
			if _, ok := lookup(reference, f); !ok {
				t.Errorf("the README's policy reference does not show %s", f)
			}
			for name, s := range schemas {
				if !schemaHas(s, s, f) {
					t.Errorf("%s does not know %s", name, f)
				}
			}
			_, notImported := kyvernoimport.NotImported[strings.TrimPrefix(f, "spec.")]
			switch {
			case imported[f] && notImported:
				t.Errorf("kyvernoimport.NotImported lists %s, which the importer produces", f)
			case !imported[f] && !notImported:
				t.Errorf("no Kyverno policy of testdata/kyverno imports into %s, and kyvernoimport.NotImported does not list it", f)
			}
			v, ok := changed[f]
			if !ok {
				t.Fatalf("no changed value for %s: add one, valid and unlike the README reference's", f)
			}
			doc := clone(base)
			set(doc, reference, f, v)
			set2 := parse(t, doc)
			if set2.Policies[0].Hash == baseSet.Policies[0].Hash {
				t.Errorf("changing %s leaves the policy hash as it was: check's drift would not see it", f)
			}
			out, refusal := export(t, set2)
			switch {
			case refusal != "":
				if !namesPathOrAncestor(refusal, f) {
					t.Errorf("the MAP export refuses a change of %s without naming it: %s", f, refusal)
				}
			case bytes.Equal(out, baseMAP):
				t.Errorf("the MAP export neither exports %s (its output is the same) nor refuses it", f)
			}
		})
	}
}

// namesPathOrAncestor reports whether msg names field f (spec.a[].b.c) or
// one of its ancestors, as a.b.c, a.b or a.
func namesPathOrAncestor(msg, f string) bool {
	parts := strings.Split(strings.ReplaceAll(strings.TrimPrefix(f, "spec."), "[]", ""), ".")
	for i := len(parts); i > 0; i-- {
		if strings.Contains(msg, strings.Join(parts[:i], ".")) {
			return true
		}
	}
	return false
}

// specFields lists the fields of t by their path in a policy document: a
// struct is walked, a list of structs as "name[]", and a label selector
// (metav1's) is one field.
func specFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + "." + name
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[metav1.LabelSelector]():
			out = append(out, path)
		case ft.Kind() == reflect.Struct:
			out = append(out, specFields(ft, path)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, specFields(ft.Elem(), path+"[]")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

var policyRefRE = regexp.MustCompile("(?s)<!-- policy-reference:[^>]*-->\\s*```yaml\\n(.*?)```\\s*<!-- /policy-reference -->")

// readmeReference is the README's policy reference as a document tree.
func readmeReference(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(testkit.Path("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := policyRefRE.FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no policy reference")
	}
	var doc map[string]any
	if err := yaml.Unmarshal(m[1], &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// exportable is the reference without what the MAP export refuses whole:
// match.any, shm, disk, runtime, imageMirrors, env entries with a
// position and assets' imageForRuntimeClasses.
func exportable(ref map[string]any) map[string]any {
	doc := clone(ref)
	spec := doc["spec"].(map[string]any)
	delete(spec["match"].(map[string]any), "any")
	for _, f := range []string{"shm", "disk", "runtime", "imageMirrors"} {
		delete(spec, f)
	}
	env := spec["env"].([]any)
	spec["env"] = slices.DeleteFunc(env, func(e any) bool { return e.(map[string]any)["position"] != nil })
	for _, a := range spec["assets"].([]any) {
		delete(a.(map[string]any), "imageForRuntimeClasses")
	}
	return doc
}

func clone(doc map[string]any) map[string]any {
	b, _ := json.Marshal(doc)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// lookup returns the value at path in doc, in the first item of a list
// that has it.
func lookup(doc any, path string) (any, bool) {
	part, rest, more := strings.Cut(path, ".")
	name, list := strings.CutSuffix(part, "[]")
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	cur, ok := m[name]
	switch {
	case !ok:
		return nil, false
	case !list && !more:
		return cur, true
	case !list:
		return lookup(cur, rest)
	}
	items, _ := cur.([]any)
	for _, item := range items {
		if v, ok := lookup(item, rest); ok {
			return v, true
		}
	}
	return nil, false
}

// set sets the value at path in doc (in the first item of a list that has
// it, else the first), making
// what is missing on the way; a missing object or list starts as ref's, so
// that it is valid.
func set(doc, ref map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	cur := doc
	for i, part := range parts[:len(parts)-1] {
		name, list := strings.CutSuffix(part, "[]")
		if !list {
			next, ok := cur[name].(map[string]any)
			if !ok {
				from, _ := lookup(ref, strings.Join(parts[:i+1], "."))
				next, _ = clone(map[string]any{"m": from})["m"].(map[string]any)
				if next == nil {
					next = map[string]any{}
				}
				cur[name] = next
			}
			cur = next
			continue
		}
		l, _ := cur[name].([]any)
		if len(l) == 0 {
			from, _ := lookup(ref, strings.TrimSuffix(strings.Join(parts[:i+1], "."), "[]"))
			l, _ = clone(map[string]any{"l": from})["l"].([]any)
			if len(l) == 0 {
				l = []any{map[string]any{}}
			}
			cur[name] = l
		}
		rest := strings.Join(parts[i+1:], ".")
		has := func(item any) bool { _, ok := lookup(item, rest); return ok }
		parent := cur
		cur = l[0].(map[string]any)
		if !slices.ContainsFunc(l, has) {
			// The item of the reference's list that has it: the same item,
			// or a new one when the exportable base left it out.
			from, _ := lookup(ref, strings.TrimSuffix(strings.Join(parts[:i+1], "."), "[]"))
			refItems, _ := clone(map[string]any{"l": from})["l"].([]any)
			switch j := slices.IndexFunc(refItems, has); {
			case j >= len(l):
				parent[name] = append(l, refItems[j])
				cur = refItems[j].(map[string]any)
			case j >= 0:
				cur = l[j].(map[string]any)
			}
			continue
		}
		for _, item := range l {
			if _, ok := lookup(item, rest); ok {
				cur = item.(map[string]any)
				break
			}
		}
	}
	cur[parts[len(parts)-1]] = v
}

func parse(t *testing.T, doc map[string]any) *policy.Set {
	t.Helper()
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.ParseSet("reference.yaml", b)
	if err != nil {
		t.Fatalf("the changed reference does not load: %v\n%s", err, b)
	}
	return s
}

// export is the MAP export of s as YAML, or why the export refuses it (an
// error or a gap).
func export(t *testing.T, s *policy.Set) ([]byte, string) {
	t.Helper()
	exported, gaps, err := mapexport.Export(s, mapexport.Options{LeakMitigation: mutate.LeakMitigationPolicy})
	if err != nil {
		return nil, err.Error()
	}
	var why []string
	for _, g := range gaps {
		why = append(why, g.What+": "+g.Why)
	}
	if len(why) > 0 {
		return nil, strings.Join(why, "; ")
	}
	var b bytes.Buffer
	if err := mapexport.WriteYAML(&b, exported, nil, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), ""
}

// readSchema reads a JSON schema and returns the schema of a SandboxPolicy
// in it: the whole file, or the definition at ref.
func readSchema(t *testing.T, name, ref string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(testkit.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if ref == "" {
		return s
	}
	return resolve(s, map[string]any{"$ref": ref})
}

func resolve(root, s map[string]any) map[string]any {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = root
		for _, p := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			s, _ = s[p].(map[string]any)
		}
	}
}

// schemaHas reports whether schema s has a property at path (list items
// through "items").
func schemaHas(root, s map[string]any, path string) bool {
	for _, part := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(part, "[]")
		props, _ := resolve(root, s)["properties"].(map[string]any)
		next, ok := props[name].(map[string]any)
		if !ok {
			return false
		}
		s = resolve(root, next)
		if list {
			if s, ok = s["items"].(map[string]any); !ok {
				return false
			}
		}
	}
	return true
}

// importedFields are the fields that the importer's conversion of the
// Kyverno policies of testdata/kyverno sets.
func importedFields(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(testkit.Path("testdata/kyverno/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kyverno corpus: %v", err)
	}
	var docs []kyvernoimport.Document
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := kyvernoimport.Split(filepath.Base(f), raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		docs = append(docs, d...)
	}
	out := map[string]bool{}
	for _, c := range kyvernoimport.Convert(docs).Policies {
		b, err := json.Marshal(c.Policy)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for _, f := range specFields(reflect.TypeFor[policy.Spec](), "spec") {
			if v, ok := lookup(doc, f); ok && v != nil {
				out[f] = true
			}
		}
	}
	return out
}
