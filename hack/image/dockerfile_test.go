package image

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repo is the repository root, where the Dockerfile, the Makefile and the
// build context are.
const repo = "../.."

// TestDockerfileGenerated: the repository's Dockerfile is what Dockerfile
// writes, so that the image has one definition.
func TestDockerfileGenerated(t *testing.T) {
	want, err := Dockerfile()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the Dockerfile is not what hack/image writes: run make dockerfile. It should be:\n%s", want)
	}
}

// TestDockerfileBuild: the Dockerfile compiles the server exactly as `make
// build-server` does: same environment, flags, version variable and
// package (the output path aside), no build tags, in the Go of go.mod.
func TestDockerfileBuild(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CURDIR": "."} // make's own
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)\s*[:?]?=\s*(.*)$`).FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = strings.TrimSpace(m[2])
	}
	if !strings.Contains(vars["LDFLAGS"], "internal/version.Version=$(VERSION)") {
		t.Fatalf("Makefile LDFLAGS %q no longer stamps internal/version.Version; change ldflags with it", vars["LDFLAGS"])
	}
	recipe := regexp.MustCompile(`(?m)^build-server:.*\n((?:\t.*\n)+)`).FindSubmatch(mk)
	if recipe == nil {
		t.Fatal("no build-server target in the Makefile")
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(string(recipe[1])), "\n") {
		if l = strings.TrimSpace(l); strings.HasSuffix(l, " "+serverPackage) {
			cmds = append(cmds, l)
		}
	}
	if len(cmds) != 1 {
		t.Fatalf("the build-server target has %d commands that build %s, want one:\n%s", len(cmds), serverPackage, recipe[1])
	}
	cmd := cmds[0]
	for range 3 {
		cmd = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(cmd, func(ref string) string {
			name := ref[2 : len(ref)-1]
			if name == "VERSION" {
				return "${VERSION}"
			}
			v, ok := vars[name]
			if !ok {
				t.Errorf("build-server uses $(%s), which the Makefile does not set", name)
			}
			return v
		})
	}
	if got, want := withoutOutput(goBuild(buildRoot)), withoutOutput(shellWords(t, cmd)); !slices.Equal(got, want) {
		t.Errorf("the Dockerfile's build differs from `make build-server` (output path aside):\nDockerfile %q\nMakefile   %q", got, want)
	}
	if slices.Contains(goBuild(buildRoot), "-tags") {
		t.Errorf("the image's build sets build tags; the server needs none")
	}

	mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil || goImage != "golang:"+string(m[1]) {
		t.Errorf("the builder is %s; go.mod's go directive is %q", goImage, m)
	}
}

// shellWords splits a command line as the shell does for the simple words
// and double-quoted strings a build command has.
func shellWords(t *testing.T, cmd string) []string {
	t.Helper()
	if strings.ContainsAny(cmd, "'\\`") {
		t.Fatalf("%q: quoting beyond double quotes", cmd)
	}
	var words []string
	for i, part := range strings.Split(cmd, `"`) {
		if i%2 == 1 {
			words = append(words, part)
			continue
		}
		words = append(words, strings.Fields(part)...)
	}
	return words
}

func withoutOutput(words []string) []string {
	if i := slices.Index(words, "-o"); i >= 0 && i+1 < len(words) {
		return slices.Delete(slices.Clone(words), i, i+2)
	}
	return words
}

// TestDockerfileContext: the build context (.dockerignore) keeps every file
// the Dockerfile copies and the image's `go build ./cmd/webhook` reads,
// and leaves out the large directories.
func TestDockerfileContext(t *testing.T) {
	f, err := os.Open(filepath.Join(repo, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(path string) bool {
		ok, err := ignore.MatchesOrParentMatches(filepath.ToSlash(path))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	// Every Go and embedded file of every main-module package the server is
	// built from, and go.mod and go.sum, which the Dockerfile copies first.
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		serverPackage)
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, abs := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	if len(files) < 3 {
		t.Fatalf("go list found no source files for %s", serverPackage)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			t.Error(err)
		}
		if excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the build needs", f)
		}
	}
	for _, big := range []string{"bin/kube-apiserver", ".git/HEAD", "e2e/tools/go.mod", "charts/sandbox-webhook/Chart.yaml", "hack/image/go.mod"} {
		if !excluded(big) {
			t.Errorf(".dockerignore lets %s into the build context", big)
		}
	}
}
