//go:build nodee2e

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

const (
	// readmeRegistry is the registry host the README's Install names.
	readmeRegistry = "registry.example.com"
	// registryAddr is where the test's registry listens, in the cluster's
	// network namespace, in its place.
	registryAddr = "127.0.0.1:" + registryPort
	// registryPort: the registry listens on every address of the cluster's
	// network namespace, so node2 reaches it on its link (its 127.0.0.1 is
	// its own).
	registryPort = "5000"
)

// readmeInstall returns the commands of the README's Install, one per
// line, with the registry host replaced by registryAddr.
func readmeInstall(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile("(?s)## Install\n.*?```sh\n(.*?)```").FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("README.md: no sh block under ## Install")
	}
	var cmds []string
	for line := range strings.Lines(strings.ReplaceAll(string(m[1]), "\\\n", " ")) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, strings.ReplaceAll(line, readmeRegistry, registryAddr))
		}
	}
	return cmds, nil
}

// pushedImage is the image the README's `make push` line pushes.
func pushedImage(cmds []string) (string, error) {
	for _, c := range cmds {
		if m := regexp.MustCompile(`^make push .*IMAGE=(\S+)`).FindStringSubmatch(c); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("the README's Install pushes no image (make push ... IMAGE=...)")
}

// warmBuild builds, outside the cluster's namespaces (where the module
// proxy is reachable), what the README's make lines build, so that they
// find every module and compiled package in place inside.
func warmBuild(ctx context.Context, root string, cmds []string) error {
	for _, c := range cmds {
		if !strings.HasPrefix(c, "make push") {
			continue
		}
		warm := strings.Replace(strings.Replace(c, "make push-chart", "make chart", 1), "make push ", "make image ", 1)
		if out, err := shell(ctx, root, warm); err != nil {
			return fmt.Errorf("%s: %w\n%s", warm, err, out)
		}
	}
	return nil
}

// runReadmeInstall runs the README's Install against the cluster, as
// written but for the registry host and what a plain-HTTP registry and
// this cluster's kubeconfig need: -insecure for `make push`, --plain-http
// for `make push-chart` and `helm install`, helm from bin/.
func runReadmeInstall(ctx context.Context, root, kubeconfig string, cmds []string) error {
	for _, c := range cmds {
		switch {
		case strings.HasPrefix(c, "make push-chart "):
			c += " PUSH_CHART_FLAGS=--plain-http"
		case strings.HasPrefix(c, "make push "):
			c += " PUSH_FLAGS=-insecure"
		case strings.HasPrefix(c, "helm "):
			c = "bin/" + c + " --plain-http --kubeconfig " + kubeconfig
		}
		start := time.Now()
		out, err := shell(ctx, root, c)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", c, err, out)
		}
		fmt.Printf("README install: %s (%s)\n", c, time.Since(start).Round(time.Second))
	}
	return nil
}

func shell(ctx context.Context, dir, line string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = dir
	helm := filepath.Join(suite.dir, "helm")
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "HELM_CONFIG_HOME="+helm, "HELM_CACHE_HOME="+helm, "HELM_DATA_HOME="+helm)
	return cmd.CombinedOutput()
}

// startRegistry runs the CNCF distribution registry (bin/registry) on
// registryPort with its storage under dir, and waits until it answers on
// registryAddr.
func startRegistry(ctx context.Context, bin, dir string) (*exec.Cmd, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
`, filepath.Join(dir, "storage"), ":"+registryPort)), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "registry"), "serve", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", registryAddr, time.Second); err == nil {
			c.Close()
			return cmd, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("the registry did not listen on %s (log %s)", registryAddr, logFile.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
