package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sandbox-webhook/sandbox-webhook"

// deps lists the packages the binary is built from, with the given go build
// flags.
func deps(t *testing.T, flags ...string) []string {
	t.Helper()
	args := append(append([]string{"list", "-deps"}, flags...), ".")
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Fields(string(out))
}

// under reports whether pkg is root or a package below it.
func under(pkg, root string) bool {
	return pkg == root || strings.HasPrefix(pkg, root+"/")
}

// TestServerBuildDeps guards the split of the server build (-tags nomap, the
// container image's): it must not link the offline MAP runner, nor through
// it kube-apiserver's admission and CEL code, gRPC or OpenTelemetry, whose
// packages and init functions cost every serve process memory and start-up
// time. The full build must link them, or the tag would have stopped
// mattering and this test proved nothing. Both builds have the server, the
// certificate commands and export-map.
func TestServerBuildDeps(t *testing.T) {
	left := []string{
		module + "/mapexport/maprun",
		"k8s.io/apiserver",
		"github.com/google/cel-go",
		"google.golang.org/grpc",
		"go.opentelemetry.io/otel",
	}
	both := []string{module + "/server", module + "/certs", module + "/mapexport", module + "/cli"}

	server, full := deps(t, "-tags", "nomap"), deps(t)
	for _, root := range left {
		for _, p := range server {
			if under(p, root) {
				t.Errorf("the server build (-tags nomap) links %s", p)
				break
			}
		}
		if !slices.ContainsFunc(full, func(p string) bool { return under(p, root) }) {
			t.Errorf("the full build does not link %s: the nomap tag no longer leaves anything out", root)
		}
	}
	for _, p := range both {
		for name, list := range map[string][]string{"server": server, "full": full} {
			if !slices.Contains(list, p) {
				t.Errorf("the %s build does not link %s", name, p)
			}
		}
	}
	t.Logf("%d packages in the full build, %d in the server build", len(full), len(server))
}
