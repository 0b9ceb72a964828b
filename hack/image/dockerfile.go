package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// How the Dockerfile's builder compiles the server: in the Go of the main
// module's go directive, as `make build-server` does (TestDockerfileBuild
// holds the two together), ${VERSION} being the build argument.
const (
	goImage       = "golang:1.26"
	serverPackage = "./cmd/webhook"
	ldflags       = "-X github.com/sandbox-webhook/sandbox-webhook/internal/version.Version=${VERSION}"
)

// buildRoot is where the Dockerfile's builder assembles the runtime
// filesystem, which its final stage copies alone.
const buildRoot = "/rootfs"

// goBuild is the Dockerfile's build of the server, as words: the binary
// written at Path under root.
func goBuild(root string) []string {
	return []string{"CGO_ENABLED=0", "go", "build", "-trimpath", "-ldflags", ldflags, "-o", root + Path, serverPackage}
}

// Dockerfile returns the Dockerfile that builds this image with a Docker
// engine (`make docker-image`) from the repository: the server compiled as
// `make build-server` compiles it, Dirs with their modes and owners and the
// files of rootfs written inline, copied onto an empty base and run as
// User with Env, Entrypoint and Cmd. The repository's Dockerfile is its
// output (`make dockerfile`; TestDockerfileGenerated fails while they
// differ).
func Dockerfile() ([]byte, error) {
	files, err := rootfsFiles()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# syntax=docker/dockerfile:1")
	line("# Written by `make dockerfile` from hack/image, the image's one definition, which")
	line("# `make image` builds without a Docker engine: change it there, not here.")
	line("#")
	line("# The sandbox-webhook image for Docker users: the static binary on an empty base, no")
	line("# shell, non-root. Build it with `make docker-image` (docker build --build-arg")
	line("# VERSION=... .).")
	line("")
	line("# build compiles the static binary exactly as `make build-server` builds bin/sandbox-webhook.")
	line("FROM %s AS build", goImage)
	line("WORKDIR /src")
	line("# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum change.")
	line("COPY go.mod go.sum ./")
	line("RUN go mod download")
	line("COPY . .")
	line("ARG VERSION=dev")
	line("# %s is the server alone (serve, certs): the command line tools, and the", serverPackage)
	line("# kube-apiserver code dry-run --map runs, are the other binary, kubectl-sandbox_webhook.")
	build, err := shellJoin(goBuild(buildRoot))
	if err != nil {
		return nil, err
	}
	line("RUN %s", build)

	line("# The rest of the runtime filesystem: its directories with their modes and owners,")
	line("# then its files.")
	var dirs []string
	for _, d := range Dirs {
		dirs = append(dirs, fmt.Sprintf("mkdir -p -m %o %s%s", d.Mode, buildRoot, d.Name))
		if d.ID != 0 {
			dirs = append(dirs, fmt.Sprintf("chown %d:%d %s%s", d.ID, d.ID, buildRoot, d.Name))
		}
	}
	line("RUN %s", strings.Join(dirs, " \\\n && "))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		content := string(files[name])
		if !strings.HasSuffix(content, "\n") || strings.Contains("\n"+content, "\nEOF\n") {
			return nil, fmt.Errorf("rootfs/%s cannot be written as a heredoc: it does not end in a newline, or holds a line EOF", name)
		}
		line("COPY <<'EOF' %s/%s", buildRoot, name)
		b.WriteString(content)
		line("EOF")
	}

	line("")
	line("# The runtime image: nothing pulled, the files above alone, run as %s.", User)
	line("FROM scratch")
	line("COPY --from=build %s/ /", buildRoot)
	line("USER %s", User)
	for _, e := range Env {
		if strings.ContainsAny(e, " \t\"'\\$") {
			return nil, fmt.Errorf("ENV %q needs quoting", e)
		}
		line("ENV %s", e)
	}
	for _, in := range []struct {
		name string
		args []string
	}{{"ENTRYPOINT", Entrypoint}, {"CMD", Cmd}} {
		j, err := json.Marshal(in.args)
		if err != nil {
			return nil, err
		}
		line("%s %s", in.name, j)
	}
	return b.Bytes(), nil
}

// shellJoin joins words into a shell command, a word with a space in
// double quotes (where ${VERSION} still expands).
func shellJoin(words []string) (string, error) {
	out := make([]string, len(words))
	for i, w := range words {
		switch {
		case strings.ContainsAny(w, "\"\\`"):
			return "", fmt.Errorf("%q needs more quoting than double quotes", w)
		case strings.ContainsAny(w, " \t"):
			w = `"` + w + `"`
		}
		out[i] = w
	}
	return strings.Join(out, " "), nil
}
