package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Module is the main module's path; RepoRoot looks for its go.mod.
const Module = "github.com/sandbox-webhook/sandbox-webhook"

// RepoRoot returns the repository root: the nearest directory at or above dir
// whose go.mod declares Module.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module "+Module+"\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s at or above %s", Module, dir)
		}
	}
}
