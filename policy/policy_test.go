package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// refresh rewrites the invalid-*.err goldens: REFRESH_GOLDEN=true go test ./policy/
var refresh = os.Getenv("REFRESH_GOLDEN") == "true"

func TestValidFiles(t *testing.T) {
	yes, no := true, false
	want := map[string]func(t *testing.T, s *Set){
		"valid-minimal.yaml": func(t *testing.T, s *Set) {
			p := only(t, s)
			wantSpec := Spec{
				Enforcement: Enforce,
				Mode:        ModeMemory,
				Match:       Match{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}}},
				Containers:  ContainerSelector{Include: []string{"*"}, InitContainers: &yes},
				Env:         []EnvVar{{Name: "UV_LINK_MODE", Value: "copy", OnConflict: Keep}},
			}
			if !reflect.DeepEqual(p.Spec, wantSpec) {
				t.Errorf("defaulted spec:\n got %+v\nwant %+v", p.Spec, wantSpec)
			}
			if p.Source != "testdata/valid-minimal.yaml" || p.Name() != "minimal" {
				t.Errorf("source %q name %q", p.Source, p.Name())
			}
			if p.NamespaceSelector != nil || p.ExcludePodSelector != nil || p.PodSelector.String() != "app=sandbox" {
				t.Errorf("selectors: ns %v pod %v exclude %v", p.NamespaceSelector, p.PodSelector, p.ExcludePodSelector)
			}
			if len(p.CacheSizes) != 0 || !p.MemoryLimit.IsZero() || !p.MemoryRequest.IsZero() {
				t.Errorf("quantities: %v %v %v", p.CacheSizes, p.MemoryLimit, p.MemoryRequest)
			}
		},
		"valid-seed.yaml": func(t *testing.T, s *Set) {
			p := only(t, s)
			if p.Spec.Enforcement != Shadow || *p.Spec.Containers.InitContainers != no {
				t.Errorf("explicit values were overridden: %+v", p.Spec)
			}
			if got := p.NamespaceSelector.String(); got != "team in (evals,rl)" {
				t.Errorf("namespace selector %q", got)
			}
			if got := p.ExcludePodSelector.String(); got != "sandbox-webhook.io/skip=true" {
				t.Errorf("exclude selector %q", got)
			}
			if len(p.CacheSizes) != 2 || p.CacheSizes[0].Cmp(resource.MustParse("1Gi")) != 0 || p.CacheSizes[1] != nil {
				t.Errorf("cache sizes %v", p.CacheSizes)
			}
			if p.MemoryLimit.Cmp(resource.MustParse("8Gi")) != 0 || p.MemoryRequest.Cmp(resource.MustParse("512Mi")) != 0 {
				t.Errorf("memory %v / %v", p.MemoryLimit, p.MemoryRequest)
			}
			if p.Spec.Memory.Level != LevelContainer || p.Spec.Env[0].OnConflict != Keep || p.Spec.Env[1].OnConflict != Override {
				t.Errorf("memory level or env conflicts: %+v %+v", p.Spec.Memory, p.Spec.Env)
			}
			if len(p.Hash) != 12 || len(s.Hash) != 12 {
				t.Errorf("hashes %q %q", p.Hash, s.Hash)
			}
		},
		"valid-hostpaths.yaml": func(t *testing.T, s *Set) {
			a := only(t, s).Spec.Assets
			if a[0].HostPath.Type != "Directory" || a[2].HostPath.Type != "File" {
				t.Errorf("hostPath types %q %q", a[0].HostPath.Type, a[2].HostPath.Type)
			}
			if a[8].HostPath != nil || a[8].Image.PullPolicy != "IfNotPresent" {
				t.Errorf("image asset %+v", a[8])
			}
		},
		"valid-any.yaml": func(t *testing.T, s *Set) {
			p := only(t, s)
			if p.PodSelector != nil || p.NamespaceSelector != nil || len(p.Any) != 3 {
				t.Fatalf("top-level selectors %v %v, %d any blocks", p.PodSelector, p.NamespaceSelector, len(p.Any))
			}
			got := []string{}
			for _, b := range p.Any {
				got = append(got, fmt.Sprintf("%v|%v|%v", b.NamespaceSelector, b.PodSelector, b.ExcludePodSelector))
			}
			want := []string{"<nil>|app=sandbox|<nil>", "<nil>|agents.x-k8s.io/sandbox-name-hash|<nil>", "<nil>|<nil>|component=router"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("compiled blocks: got %q, want %q", got, want)
			}
		},
		"valid-multi.yaml": func(t *testing.T, s *Set) {
			got := []string{}
			for _, p := range s.Policies {
				got = append(got, p.Name()+" "+p.Source)
			}
			want := []string{"a-memory testdata/valid-multi.yaml#2", "b-env testdata/valid-multi.yaml#1"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("policies in application order: got %q, want %q", got, want)
			}
		},
	}

	files, _ := filepath.Glob("testdata/valid-*.yaml")
	if len(files) < len(want) {
		t.Fatalf("found %d valid files, want at least %d", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if check, ok := want[filepath.Base(f)]; ok {
				check(t, s)
			}
		})
	}
}

func only(t *testing.T, s *Set) *Policy {
	t.Helper()
	if len(s.Policies) != 1 {
		t.Fatalf("got %d policies, want 1", len(s.Policies))
	}
	return s.Policies[0]
}

// TestInvalidFiles compares the whole error of every invalid-*.yaml with
// its invalid-*.err golden.
func TestInvalidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid-*.yaml")
	if len(files) == 0 {
		t.Fatal("no invalid files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Load error is %T (%v), want *Error", err, err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".err"
			if refresh {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden (REFRESH_GOLDEN=true writes it): %v", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
	goldens, _ := filepath.Glob("testdata/*.err")
	for _, g := range goldens {
		if _, err := os.Stat(strings.TrimSuffix(g, ".err") + ".yaml"); err != nil {
			t.Errorf("stale golden %s: no matching .yaml", g)
		}
	}
}

// TestErrorProblems checks the structure behind the printed error.
func TestErrorProblems(t *testing.T) {
	_, err := Load("testdata/invalid-multi-doc.yaml", "testdata/does-not-exist.yaml")
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("got %T %v, want *Error", err, err)
	}
	want := []Problem{
		{Source: "testdata/invalid-multi-doc.yaml#2", Policy: "second",
			Err: field.Invalid(field.NewPath("spec", "caches").Index(0).Child("sizeLimit"), "1 Gi", "must be a quantity such as 1Gi")},
		{Source: "testdata/does-not-exist.yaml", Err: documentError("cannot read: no such file or directory")},
	}
	if !reflect.DeepEqual(perr.Problems, want) {
		t.Errorf("problems:\n got %+v\nwant %+v", perr.Problems, want)
	}
	if got, want := err.Error(), `testdata/invalid-multi-doc.yaml#2 (second): spec.caches[0].sizeLimit: Invalid value: "1 Gi": must be a quantity such as 1Gi
testdata/does-not-exist.yaml: cannot read: no such file or directory`; got != want {
		t.Errorf("Error():\n%s\nwant\n%s", got, want)
	}
}

// TestLoadConfigMapDirectory loads a directory laid out like a mounted
// ConfigMap: keys are symlinks into ..data, itself a symlink to a
// timestamped directory that an update swaps atomically.
func TestLoadConfigMapDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	policy := func(name string) string {
		return "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\nmetadata: {name: " + name + "}\n" +
			"spec: {match: {namespaces: [rl]}, memory: {limit: 8Gi}}\n"
	}
	v1 := "..2026_08_01_10_00_00.000000001"
	write(v1+"/b.yaml", policy("alpha"))
	write(v1+"/a.yml", policy("zulu"))
	write(v1+"/c.json", `{"apiVersion":"sandbox-webhook.io/v1alpha1","kind":"SandboxPolicy","metadata":{"name":"mike"},"spec":{"match":{"namespaces":["rl"]},"mode":"disk"}}`)
	write(v1+"/notes.txt", "not a policy")
	link(v1, "..data")
	for _, key := range []string{"a.yml", "b.yaml", "c.json", "notes.txt"} {
		link(filepath.Join("..data", key), key)
	}
	write(".hidden.yaml", "not: a policy")
	if err := os.Mkdir(filepath.Join(dir, "subdir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("subdir.yaml/x.yaml", "not: read")

	names := func() []string {
		t.Helper()
		s, err := Load(dir)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		var got []string
		for _, p := range s.Policies {
			got = append(got, p.Name()+" "+strings.TrimPrefix(p.Source, dir+"/"))
		}
		return got
	}
	want := []string{"alpha b.yaml", "mike c.json", "zulu a.yml"}
	if got := names(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	// A ConfigMap update: new timestamped directory, ..data swapped by rename.
	v2 := "..2026_08_01_11_00_00.000000002"
	write(v2+"/b.yaml", policy("bravo"))
	write(v2+"/a.yml", policy("yankee"))
	// c.json is no longer a key: its symlink dangles until the kubelet
	// removes it.
	link(v2, "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	want = []string{"bravo b.yaml", "yankee a.yml"}
	if got := names(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the update: got %q, want %q", got, want)
	}
}

func TestLoadDuplicateNames(t *testing.T) {
	dir := t.TempDir()
	doc := "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\nmetadata: {name: uv-cache}\n" +
		"spec: {match: {namespaces: [rl]}, memory: {limit: 8Gi}}\n"
	files := map[string]string{
		"a.yaml": doc,
		"b.yaml": strings.ReplaceAll(doc, "uv-cache", "other") + "---\n" + doc,
		"c.yaml": doc,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("Load succeeded, want duplicate-name errors")
	}
	got := strings.ReplaceAll(err.Error(), dir+"/", "")
	want := `b.yaml#2 (uv-cache): metadata.name: Duplicate value: "uv-cache": also defined in a.yaml
c.yaml (uv-cache): metadata.name: Duplicate value: "uv-cache": also defined in a.yaml`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestHashStability(t *testing.T) {
	const base = `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: uv
spec:
  match:
    podSelector:
      matchLabels: {app: sandbox, tier: rl}
  caches:
  - name: uv-cache
    mountPath: /root/.cache/uv
    sizeLimit: 1Gi
  env:
  - name: UV_LINK_MODE
    value: copy
  memory:
    limit: 8Gi
`
	// Same content: other key order, flow style, quoting, comments and
	// defaults spelled out.
	const reformatted = `# reformatted
kind: "SandboxPolicy"
apiVersion: sandbox-webhook.io/v1alpha1
spec:
  memory: {level: pod, limit: "8Gi"}
  env: [{value: copy, name: UV_LINK_MODE, onConflict: keep}]
  caches: [{sizeLimit: 1Gi, mountPath: "/root/.cache/uv", name: 'uv-cache'}]
  enforcement: enforce
  containers: {include: ["*"], initContainers: true}
  match: {podSelector: {matchLabels: {tier: rl, app: sandbox}}}
metadata: {name: uv}
`
	hash := func(src, raw string) (string, string) {
		t.Helper()
		s, err := ParseSet(src, []byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return s.Policies[0].Hash, s.Hash
	}
	h1, s1 := hash("base.yaml", base)
	h2, s2 := hash("elsewhere/reformatted.yaml", reformatted)
	if h1 != h2 || s1 != s2 {
		t.Errorf("reformatting changed the hash: policy %s vs %s, set %s vs %s", h1, h2, s1, s2)
	}
	for _, change := range [][2]string{
		{"sizeLimit: 1Gi", "sizeLimit: 2Gi"},
		{"value: copy", "value: hardlink"},
		{"name: uv\n", "name: uv2\n"},
		{"app: sandbox", "app: other"},
		{"limit: 8Gi", "limit: 8Gi\n    level: container"},
	} {
		h3, s3 := hash("changed.yaml", strings.Replace(base, change[0], change[1], 1))
		if h3 == h1 || s3 == s1 {
			t.Errorf("%q -> %q kept the hash %s (set %s)", change[0], change[1], h3, s3)
		}
	}
}

// compileTyped compiles a policy written in Go, with the errors Parse gives
// for a document.
func compileTyped(source string, sp SandboxPolicy) (*Policy, error) {
	p, errs := compile(source, sp)
	return p, asError(problemsOf(source, sp.Metadata.Name, errs))
}

func TestCompile(t *testing.T) {
	sp := SandboxPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		Metadata: Metadata{Name: "in-go"},
		Spec: Spec{
			Match: Match{Namespaces: []string{"rl"}},
			Env:   []EnvVar{{Name: "UV_LINK_MODE", Value: "copy"}},
		},
	}
	p, err := compileTyped("in-go.go", sp)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Env[0].OnConflict != Keep || p.Source != "in-go.go" {
		t.Errorf("compiled %+v", p)
	}
	if sp.Spec.Env[0].OnConflict != "" {
		t.Error("compile wrote defaults into its argument")
	}

	sp.Kind = ""
	sp.Spec.Env[0].Name = "UV LINK MODE"
	_, err = compileTyped("in-go.go", sp)
	want := `in-go.go (in-go): kind: Required value: must be "SandboxPolicy"
in-go.go (in-go): spec.env[0].name: Invalid value: "UV LINK MODE": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestNewSetOrder(t *testing.T) {
	var ps []*Policy
	for _, name := range []string{"c", "a", "b"} {
		p, err := compileTyped(name+".yaml", SandboxPolicy{
			TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
			Metadata: Metadata{Name: name},
			Spec:     Spec{Match: Match{Namespaces: []string{"*"}}, Mode: ModeDisk},
		})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	s, err := NewSet(ps)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Policies {
		got = append(got, p.Name())
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	if ps[0].Name() != "c" {
		t.Error("NewSet reordered its argument")
	}
	empty, err := NewSet(nil)
	if err != nil || len(empty.Policies) != 0 || empty.Hash == s.Hash {
		t.Errorf("empty set: %+v, %v", empty, err)
	}
}

func TestParse(t *testing.T) {
	ps, err := Parse("x.yaml", []byte("# nothing here\n---\n"))
	if err != nil || len(ps) != 0 {
		t.Errorf("empty file: %v, %v", ps, err)
	}
	ps, err = Parse("x.yaml", []byte("apiVersion: v1\nkind: Pod\n"))
	if err == nil || ps != nil {
		t.Errorf("invalid file: %v, %v", ps, err)
	}
}

// TestLoadBoundsInput: a policy file of aliases to aliases, or one larger
// than any policy, is refused with the file named, before it is expanded or
// read whole.
func TestLoadBoundsInput(t *testing.T) {
	dir := t.TempDir()
	var laughs strings.Builder
	laughs.WriteString("apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicy\nmetadata: {name: lol}\nspec:\n  match: {namespaces: [a]}\n  x0: &x0 \"" + strings.Repeat("x", 1024) + "\"\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&laughs, "  x%d: &x%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*x%d,", i-1), 10), ","))
	}
	aliases := filepath.Join(dir, "aliases.yaml")
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(aliases, []byte(laughs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("y", 9<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{aliases: "YAML aliases expand to more than 8 MiB", big: "larger than 8 MiB"} {
		_, err := Load(file)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			t.Errorf("Load(%s): %v, want an error naming the file and saying %q", file, err, want)
		}
	}
}

// TestLoadEmpty: nothing to load is an error naming each empty path, unless
// LoadAllowEmpty says zero policies is intended. A truncated file is the
// same as an empty one.
func TestLoadEmpty(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	comments := filepath.Join(dir, "comments.yaml")
	noPolicies := filepath.Join(dir, "nothing")
	parent := filepath.Join(dir, "parent")
	for path, content := range map[string]string{
		empty:                                "",
		comments:                             "# nothing yet\n---\n",
		filepath.Join(noPolicies, "README"):  "not a policy file\n",
		filepath.Join(parent, "a", "p.yaml"): "",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const fileDetail = "holds no policy document (empty or truncated?); an empty policy set would leave every pod unmutated"
	const dirDetail = "holds no *.yaml, *.yml or *.json file (subdirectories are not read); an empty policy set would leave every pod unmutated"
	_, err := Load(empty, comments, noPolicies, parent)
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("Load of empty paths: got %T %v, want *Error", err, err)
	}
	want := []Problem{
		{Source: empty, Err: documentError(fileDetail)},
		{Source: comments, Err: documentError(fileDetail)},
		{Source: noPolicies, Err: documentError(dirDetail)},
		{Source: parent, Err: documentError(dirDetail)},
	}
	if !reflect.DeepEqual(perr.Problems, want) {
		t.Errorf("problems:\n got %+v\nwant %+v", perr.Problems, want)
	}

	// One empty file beside a good one is still an error: it is a policy
	// lost to a truncated write or an unfinished edit.
	if _, err := Load("testdata/valid-minimal.yaml", empty); err == nil || !strings.Contains(err.Error(), empty+": "+fileDetail) {
		t.Errorf("Load of a good and an empty file: %v", err)
	}

	set, err := LoadAllowEmpty(empty, comments, noPolicies, parent)
	if err != nil || len(set.Policies) != 0 {
		t.Errorf("LoadAllowEmpty: %+v, %v; want an empty set", set, err)
	}
	if _, err := LoadAllowEmpty("testdata/does-not-exist.yaml"); err == nil {
		t.Error("LoadAllowEmpty of a missing path succeeded; only emptiness is allowed")
	}
}

// TestLoadSkipsPolicyTests: a policy test kept beside its policies, as the
// README suggests, is skipped where the directory is loaded (validate,
// dry-run, a ConfigMap made from the directory); named on its own it is
// refused as a test, and a directory of tests only holds no policy.
func TestLoadSkipsPolicyTests(t *testing.T) {
	const test = "apiVersion: sandbox-webhook.io/v1alpha1\nkind: SandboxPolicyTest\nmetadata: {name: t}\npolicies: [.]\ncases: []\n"
	policy, err := os.ReadFile("testdata/valid-minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, onlyTests := t.TempDir(), t.TempDir()
	for path, content := range map[string]string{
		filepath.Join(dir, "policy.yaml"):                     string(policy),
		filepath.Join(dir, "sandbox-webhook-test.yaml"):       test,
		filepath.Join(onlyTests, "sandbox-webhook-test.yaml"): test,
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := Load(dir)
	if err != nil || len(set.Policies) != 1 {
		t.Fatalf("Load(policy and its test): %v, %v", set, err)
	}
	testFile := filepath.Join(dir, "sandbox-webhook-test.yaml")
	for path, want := range map[string]string{
		testFile:  testFile + ": is a policy test (kind SandboxPolicyTest), not a policy: kubectl-sandbox_webhook test runs it",
		onlyTests: onlyTests + ": holds only policy tests, no policy; an empty policy set would leave every pod unmutated",
	} {
		if _, err := Load(path); err == nil || err.Error() != want {
			t.Errorf("Load(%s): %v, want %s", path, err, want)
		}
	}
}
