// Package release checks what a release publishes, with no Docker engine: the image
// `make image` builds and `make push` pushes, the chart `make chart` packages and `make
// push-chart` pushes, and the Dockerfile (BuildKit's own parser and lint rules, those of
// `docker build --check`, the build context, and the build command against the
// Makefile's). The tests run in the repository root, where the Dockerfile, the Makefile
// and the build context are.
package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/moby/buildkit/frontend/dockerui"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/image"
)

func TestMain(m *testing.M) {
	root, err := harness.RepoRoot(".")
	if err == nil {
		err = os.Chdir(root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

const (
	builderImage = "golang:1.26"
	finalImage   = "scratch"
	mainPackage  = "./cmd/webhook"
	// rootfs is where the builder assembles the runtime filesystem.
	rootfs = "/rootfs"
)

// dockerfile parses the Dockerfile with BuildKit and returns its stages; parser warnings
// and lint warnings from instruction parsing fail the test.
func dockerfile(t *testing.T) ([]byte, []instructions.Stage) {
	t.Helper()
	dt, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("parser warning: %s (line %d)", w.Short, w.Location.Start.Line)
	}
	lint := linter.New(&linter.Config{ExperimentalAll: true, Warn: func(rule, _, _, msg string, loc []parser.Range) {
		t.Errorf("lint %s: %s (%v)", rule, msg, loc)
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("instructions: %v", err)
	}
	return dt, stages
}

// registry answers BuildKit's base image lookups with the platform of the builder image,
// in place of the network the lint would otherwise need (scratch is never looked up).
type registry struct{}

func (registry) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	img := ocispecs.Image{
		Platform: ocispecs.Platform{OS: "linux", Architecture: "amd64"},
		RootFS:   ocispecs.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromString(ref)}},
		Config:   ocispecs.ImageConfig{Env: []string{"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
	}
	dt, err := json.Marshal(img)
	return ref, "", dt, err
}

// TestDockerfileLint runs every BuildKit lint rule, experimental ones included, the way
// `docker build --check` does.
func TestDockerfileLint(t *testing.T) {
	dt, _ := dockerfile(t)
	results, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		SourceMap:      &llb.SourceMap{Filename: "Dockerfile", Language: "Dockerfile", Data: dt, Definition: &llb.Definition{}},
		MetaResolver:   registry{},
		TargetPlatform: &ocispecs.Platform{OS: "linux", Architecture: "amd64"},
		Config:         dockerui.Config{BuildArgs: map[string]string{"VERSION": "v0.0.0-test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if results.Error != nil {
		t.Fatalf("lint: %s", results.Error.Message)
	}
	for _, w := range results.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		t.Errorf("Dockerfile:%d: %s: %s", line, w.RuleName, w.Detail)
	}
}

func TestDockerfileStages(t *testing.T) {
	_, stages := dockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("want a builder and a final stage, got %d stages", len(stages))
	}
	build, final := stages[0], stages[1]
	if build.BaseName != builderImage {
		t.Errorf("builder FROM %s, want %s", build.BaseName, builderImage)
	}
	if base, _, _ := strings.Cut(final.BaseName, "@"); base != finalImage {
		t.Errorf("final FROM %s, want %s", final.BaseName, finalImage)
	}

	// The builder downloads modules from go.mod and go.sum alone, before the source.
	var copies []*instructions.CopyCommand
	download, buildAt := -1, -1
	for i, cmd := range build.Commands {
		switch c := cmd.(type) {
		case *instructions.CopyCommand:
			copies = append(copies, c)
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if line == "go mod download" {
				download = i
			}
			if strings.Contains(line, "go build") {
				buildAt = i
			}
		}
	}
	if len(copies) != 2 || !slices.Equal(copies[0].SourcePaths, []string{"go.mod", "go.sum"}) {
		t.Fatalf("builder COPYs %v; want go.mod go.sum first, then the source", copies)
	}
	inOrder := download >= 0 && buildAt >= 0 && indexOf(build.Commands, copies[0]) < download &&
		download < indexOf(build.Commands, copies[1]) && indexOf(build.Commands, copies[1]) < buildAt
	if !inOrder {
		t.Errorf("want COPY go.mod go.sum, RUN go mod download, COPY source, RUN go build in that order")
	}

	// The builder assembles the runtime filesystem internal/image writes for `make
	// image`: the binary, its /etc files, and its directories with their modes and
	// owners.
	var setup string
	for _, cmd := range build.Commands {
		if c, ok := cmd.(*instructions.RunCommand); ok && strings.Contains(strings.Join(c.CmdLine, " "), "internal/image/rootfs") {
			setup = strings.Join(c.CmdLine, " ")
		}
	}
	wantSetup := []string{"cp -r internal/image/rootfs/etc " + rootfs + "/etc"}
	for _, d := range image.Dirs {
		if d.Name == "/etc" {
			continue
		}
		if d.Mode != 0o755 {
			wantSetup = append(wantSetup, fmt.Sprintf("mkdir -p -m %o %s%s", d.Mode, rootfs, d.Name))
		}
		if d.ID != 0 {
			wantSetup = append(wantSetup, fmt.Sprintf("chown %d:%d %s%s", d.ID, d.ID, rootfs, d.Name))
		}
	}
	for _, w := range wantSetup {
		if !strings.Contains(setup, w) {
			t.Errorf("the builder's runtime filesystem lacks %q, which internal/image's has:\n%s", w, setup)
		}
	}

	// The final stage: that filesystem alone, non-root, exec-form entrypoint, no shell
	// needed, as internal/image configures the image.
	var user string
	var entrypoint, cmdArgs, env []string
	for _, cmd := range final.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			if !c.PrependShell {
				entrypoint = c.CmdLine
			}
		case *instructions.CmdCommand:
			if !c.PrependShell {
				cmdArgs = c.CmdLine
			}
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env = append(env, kv.Key+"="+kv.Value)
			}
		case *instructions.RunCommand:
			t.Errorf("final stage RUNs %v; the image has no shell", c.CmdLine)
		case *instructions.CopyCommand:
			if c.From != build.Name || !slices.Equal(c.SourcePaths, []string{rootfs + "/"}) || c.DestPath != "/" {
				t.Errorf("final stage COPY %v --from=%q to %s; want only %s/ from %s at /", c.SourcePaths, c.From, c.DestPath, rootfs, build.Name)
			}
		}
	}
	if user != image.User {
		t.Errorf("USER %q, want %s", user, image.User)
	}
	if !slices.Equal(entrypoint, image.Entrypoint) || !slices.Equal(cmdArgs, image.Cmd) || !slices.Equal(env, image.Env) {
		t.Errorf("ENTRYPOINT %q CMD %q ENV %q, want exec form %q %q and %q", entrypoint, cmdArgs, env, image.Entrypoint, image.Cmd, image.Env)
	}
	var run string
	for _, cmd := range build.Commands {
		if c, ok := cmd.(*instructions.RunCommand); ok && strings.Contains(strings.Join(c.CmdLine, " "), "go build") {
			run = strings.Join(c.CmdLine, " ")
		}
	}
	if !strings.HasSuffix(run, "-o "+rootfs+image.Path+" "+mainPackage) {
		t.Errorf("the build %q does not write the binary to %s%s", run, rootfs, image.Path)
	}
}

// TestDockerfileBuildMatchesMakefile checks that the image is built exactly as
// `make build-server` builds the server: same environment, flags, version variable and package
// (the output path aside), and no build tags: the image's binary is cmd/webhook, which
// has no command line tools to leave out.
func TestDockerfileBuildMatchesMakefile(t *testing.T) {
	_, stages := dockerfile(t)
	var run string
	var versionArg bool
	for _, cmd := range stages[0].Commands {
		switch c := cmd.(type) {
		case *instructions.RunCommand:
			if strings.Contains(strings.Join(c.CmdLine, " "), "go build") {
				run = strings.Join(c.CmdLine, " ")
			}
		case *instructions.ArgCommand:
			for _, a := range c.Args {
				versionArg = versionArg || a.Key == "VERSION"
			}
		}
	}
	if !versionArg {
		t.Errorf("the builder stage has no ARG VERSION; `make image` passes --build-arg VERSION")
	}

	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CURDIR": "."} // make's own
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)\s*[:?]?=\s*(.*)$`).FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = strings.TrimSpace(m[2])
	}
	if !strings.Contains(vars["LDFLAGS"], "internal/version.Version=$(VERSION)") {
		t.Fatalf("Makefile LDFLAGS %q no longer stamps internal/version.Version; update this test and the Dockerfile together", vars["LDFLAGS"])
	}
	server := makeRecipe(t, mk, vars, "build-server", mainPackage)

	got := shellWords(t, run)
	if !slices.Equal(server, got) {
		t.Errorf("Dockerfile build differs from `make build-server`, the build of %s (output path aside):\nDockerfile %q\nMakefile   %q", mainPackage, got, server)
	}
	if !slices.Contains(got, mainPackage) {
		t.Errorf("the build does not build %s", mainPackage)
	}
	if slices.Contains(got, "-tags") {
		t.Errorf("the image's build %q sets build tags; the two binaries need none", got)
	}
}

// makeRecipe returns the one command of a Makefile target that builds pkg, as shell
// words: make's $(VAR) references expanded (LDFLAGS holds $(VERSION)), VERSION set as
// shellWords sets it, the output path dropped.
func makeRecipe(t *testing.T, mk []byte, vars map[string]string, target, pkg string) []string {
	t.Helper()
	recipe := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:.*\n((?:\t.*\n)+)`).FindStringSubmatch(string(mk))
	if recipe == nil {
		t.Fatalf("no %s target in the Makefile", target)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(recipe[1]), "\n") {
		if line = strings.TrimSpace(line); strings.HasSuffix(line, " "+pkg) {
			cmds = append(cmds, line)
		}
	}
	if len(cmds) != 1 {
		t.Fatalf("the %s target has %d commands that build %s, want one:\n%s", target, len(cmds), pkg, recipe[1])
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
				t.Errorf("the %s target uses $(%s), which the Makefile does not set", target, name)
			}
			return v
		})
	}
	return shellWords(t, cmd)
}

// TestDockerfileContext checks every COPY source exists, is not excluded by .dockerignore,
// and that the context keeps every file the image's `go build ./cmd/webhook`
// reads while leaving out the large directories.
func TestDockerfileContext(t *testing.T) {
	_, stages := dockerfile(t)
	f, err := os.Open(".dockerignore")
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

	for _, s := range stages {
		for _, cmd := range s.Commands {
			c, ok := cmd.(*instructions.CopyCommand)
			if !ok || c.From != "" {
				continue
			}
			for _, src := range c.SourcePaths {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("COPY source %s: %v", src, err)
				}
				if src != "." && excluded(src) {
					t.Errorf("COPY source %s is excluded by .dockerignore", src)
				}
			}
		}
	}

	// Every Go and embedded file of every main-module package the image's binary is built
	// from.
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		mainPackage).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, abs := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(wd, abs)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	if len(files) < 3 {
		t.Fatalf("go list found no source files for %s", mainPackage)
	}
	for _, f := range files {
		if excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the build needs", f)
		}
	}
	for _, big := range []string{"bin/kube-apiserver", ".git/HEAD", "e2e/tools/go.mod", "charts/sandbox-webhook/Chart.yaml"} {
		if !excluded(big) {
			t.Errorf(".dockerignore lets %s into the build context", big)
		}
	}
}

func shellWords(t *testing.T, cmd string) []string {
	t.Helper()
	words, err := shell.NewLex('\\').ProcessWords(cmd, shell.EnvsFromSlice([]string{"VERSION=v0.0.0-test"}))
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	// Drop the output path, the one thing that differs.
	if i := slices.Index(words, "-o"); i >= 0 && i+1 < len(words) {
		words = slices.Delete(words, i, i+2)
	}
	return words
}

func indexOf(cmds []instructions.Command, c instructions.Command) int {
	return slices.Index(cmds, c)
}
