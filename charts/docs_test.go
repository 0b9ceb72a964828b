package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// TestInstallDocCommands renders the chart with every `helm install` and `helm upgrade`
// of docs/install.md: their --set flags and the values files shown there must pass the
// schema and the chart's checks, so the page stays a copy-paste that works.
func TestInstallDocCommands(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	// Values files: yaml blocks whose first line names them.
	valuesFiles := map[string]map[string]any{}
	for _, m := range regexp.MustCompile("(?s)```yaml\n# (values-[a-z-]+\\.yaml)\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		v := map[string]any{}
		if err := yaml.Unmarshal([]byte(m[2]), &v); err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		valuesFiles[m[1]] = v
	}

	used := map[string]bool{}
	var commands [][]string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		text := strings.ReplaceAll(block[1], "\\\n", " ")
		for line := range strings.Lines(text) {
			words := docWords(line)
			if len(words) >= 2 && words[0] == "helm" && (words[1] == "install" || words[1] == "upgrade") {
				commands = append(commands, words)
			}
		}
	}
	if len(commands) < 8 {
		t.Fatalf("found %d helm install/upgrade commands in docs/install.md, want every one of them", len(commands))
	}

	defer func() {
		for name := range valuesFiles {
			if !used[name] {
				t.Errorf("%s is shown but no helm command uses it", name)
			}
		}
	}()
	// The policies shown in values files must load.
	parsed := 0
	for name, v := range valuesFiles {
		inline, _, _ := unstructured.NestedMap(v, "policies", "inline")
		for file, text := range inline {
			if text == nil {
				continue
			}
			raw, ok := text.(string)
			if !ok { // a SandboxPolicy mapping: the chart renders it as YAML
				b, err := yaml.Marshal(text)
				if err != nil {
					t.Fatal(err)
				}
				raw = string(b)
			}
			if _, err := policy.Parse(name+": "+file, []byte(raw)); err != nil {
				t.Errorf("%v", err)
			}
			parsed++
		}
	}
	if parsed == 0 {
		t.Error("no policy found in the page's values files")
	}

	for _, words := range commands {
		t.Run(strings.Join(words, " "), func(t *testing.T) {
			first := 4
			switch {
			case words[2] != "sandbox-webhook":
				t.Fatalf("want `helm %s sandbox-webhook CHART ...`", words[1])
			case strings.HasPrefix(words[3], "oci://") && strings.HasSuffix(words[3], "/sandbox-webhook"):
				// The chart `make push-chart` pushed: these files
				// (TestChartPush renders one from a registry).
				if len(words) < 6 || words[4] != "--version" {
					t.Fatalf("want `helm %s sandbox-webhook oci://.../sandbox-webhook --version V ...`", words[1])
				}
				first = 6
			case words[3] != "charts/sandbox-webhook":
				t.Fatalf("want `helm %s sandbox-webhook charts/sandbox-webhook ...` or the chart from an OCI registry", words[1])
			}
			vals := map[string]any{}
			ns := ""
			for i := first; i < len(words); i++ {
				switch w := words[i]; {
				case w == "--namespace":
					i++
					ns = words[i]
				case w == "--set":
					i++
					if err := strvals.ParseInto(words[i], vals); err != nil {
						t.Fatalf("--set %s: %v", words[i], err)
					}
				case w == "-f":
					i++
					file, ok := valuesFiles[words[i]]
					if !ok {
						t.Fatalf("-f %s: no such values file shown on the page", words[i])
					}
					vals = mergeMaps(vals, file)
					used[words[i]] = true
				case slices.Contains([]string{"--create-namespace", "--wait", "--reuse-values"}, w):
				default:
					t.Fatalf("unexpected argument %q", w)
				}
			}
			if ns == "" {
				t.Fatal("no --namespace")
			}
			r, err := renderValues(t, vals, words[2], ns)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if len(all[*appsv1.Deployment](r)) != 1 || len(all[*admissionregistrationv1.MutatingWebhookConfiguration](r)) != 1 {
				t.Errorf("rendered %v", kinds(r))
			}
		})
	}
}

// TestInstallDocCertificateHosts checks that the `certs generate` hosts of the page are
// the Service names the chart's webhook configuration calls in that namespace.
func TestInstallDocCertificateHosts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var hosts []string
	for line := range strings.Lines(text) {
		words := docWords(line)
		if len(words) > 3 && words[1] == "certs" && words[2] == "generate" {
			for i, w := range words {
				if w == "--host" {
					hosts = append(hosts, words[i+1])
				}
			}
		}
	}
	want := []string{"sandbox-webhook.sandbox-webhook.svc", "sandbox-webhook.sandbox-webhook.svc.cluster.local"}
	if !slices.Equal(hosts, want) {
		t.Errorf("certs generate hosts %v, want %v (release sandbox-webhook in namespace sandbox-webhook)", hosts, want)
	}
}

// docWords splits a documented shell command into words: double quotes group, and a
// command substitution stands for a base64 CA bundle.
func docWords(line string) []string {
	line = regexp.MustCompile(`"\$\([^)]*\)"`).ReplaceAllString(line, "Q0EK")
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote = !inQuote
			inWord = true
		case (r == ' ' || r == '\t' || r == '\n') && !inQuote:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inQuote && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// mergeMaps merges src over dst the way Helm merges values files (maps recursively).
func mergeMaps(dst, src map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// TestReadmeInstall: the README's install builds and pushes an image (make push), and
// installs the chart with that image; the rendered Deployment runs exactly
// the image built and pushed.
func TestReadmeInstall(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Install\n.*?```sh\n(.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("README.md: no sh block under ## Install")
	}
	var pushed string
	vals := map[string]any{}
	ns := ""
	for line := range strings.Lines(strings.ReplaceAll(string(m[1]), "\\\n", " ")) {
		words := docWords(line)
		switch {
		case len(words) >= 3 && words[0] == "make" && words[1] == "push":
			for _, w := range words[2:] {
				if v, ok := strings.CutPrefix(w, "IMAGE="); ok {
					pushed = v
				}
			}
		case len(words) >= 4 && words[0] == "helm" && words[1] == "install":
			for i := 4; i < len(words); i++ {
				switch words[i] {
				case "--namespace":
					i++
					ns = words[i]
				case "--set":
					i++
					if err := strvals.ParseInto(words[i], vals); err != nil {
						t.Fatalf("--set %s: %v", words[i], err)
					}
				}
			}
		}
	}
	if pushed == "" {
		t.Fatal("the README's Install pushes no image (make push IMAGE=...)")
	}
	built := pushed
	r, err := renderValues(t, vals, "sandbox-webhook", ns)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	deps := all[*appsv1.Deployment](r)
	if len(deps) != 1 || deps[0].Spec.Template.Spec.Containers[0].Image != built {
		t.Errorf("the installed Deployment does not run the image built (%s): %v", built, kinds(r))
		for _, d := range deps {
			t.Errorf("image %s", d.Spec.Template.Spec.Containers[0].Image)
		}
	}
}
