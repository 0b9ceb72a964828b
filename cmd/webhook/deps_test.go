package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sandbox-webhook/sandbox-webhook"

// deps lists the packages the binary of the main package pkg is built from.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	args := []string{"list", "-deps", pkg}
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
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

// TestServerBinaryDeps guards the split of the two binaries: the server
// (cmd/webhook, the container image's) must not link the command line's
// packages, nor the offline MAP runner and through it kube-apiserver's
// admission and CEL code, gRPC or OpenTelemetry, whose packages and init
// functions would cost every serve process memory and start-up time. The
// command line (cmd/kubectl-sandbox_webhook) must link them, or the split
// would have stopped mattering and this test proved nothing. Each binary
// links its own commands and only those.
func TestServerBinaryDeps(t *testing.T) {
	left := []string{
		module + "/internal/mapexport/maprun",
		"k8s.io/apiserver",
		"github.com/google/cel-go",
		"google.golang.org/grpc",
		"go.opentelemetry.io/otel",
	}
	server, cli := deps(t, "./cmd/webhook"), deps(t, "./cmd/kubectl-sandbox_webhook")
	for _, root := range left {
		for _, p := range server {
			if under(p, root) {
				t.Errorf("the server binary links %s", p)
				break
			}
		}
		if !slices.ContainsFunc(cli, func(p string) bool { return under(p, root) }) {
			t.Errorf("the command line does not link %s: the split no longer leaves anything out of the server", root)
		}
	}
	own := map[string][]string{
		"server": {module + "/internal/server", module + "/certs", module + "/internal/command/serve", module + "/internal/command/certscmd"},
		"command line": {module + "/internal/mapexport", module + "/internal/command/dryrun", module + "/internal/command/validate",
			module + "/internal/command/testcmd", module + "/internal/command/check", module + "/internal/command/exportmap"},
	}
	for name, list := range map[string][]string{"server": server, "command line": cli} {
		for owner, pkgs := range own {
			for _, p := range pkgs {
				if got, want := slices.Contains(list, p), owner == name; got != want {
					t.Errorf("the %s binary links %s: %v, want %v", name, p, got, want)
				}
			}
		}
	}
	t.Logf("%d packages in the command line, %d in the server", len(cli), len(server))
}

// TestCobraOnlyInCommands: only command packages (the binaries, the
// commands under internal/command, and what they share to define commands and
// flags) import cobra or pflag, or a command package; the packages the
// commands are made of export plain functions and option structs. (What
// kube-apiserver's packages import is theirs.)
func TestCobraOnlyInCommands(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	commands := []string{module + "/cmd", module + "/internal/command", module + "/internal/flags"}
	isCommand := func(pkg string) bool {
		return slices.ContainsFunc(commands, func(root string) bool { return under(pkg, root) })
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if isCommand(pkg) {
			continue
		}
		checked++
		for _, imp := range imports {
			if under(imp, "github.com/spf13/cobra") || under(imp, "github.com/spf13/pflag") || isCommand(imp) {
				t.Errorf("%s imports %s; only command packages may", pkg, imp)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d packages; go list printed:\n%s", checked, out)
	}
}
