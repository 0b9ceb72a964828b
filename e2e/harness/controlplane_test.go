package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A missing control plane is an error that says how to get it; the suite
// fails on it instead of skipping.
func TestCheckAssets(t *testing.T) {
	dir := t.TempDir()
	err := CheckAssets(dir)
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver and etcd missing") || !strings.Contains(err.Error(), "run make tools") {
		t.Fatalf("CheckAssets(empty) = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckAssets(dir); err == nil || !strings.Contains(err.Error(), "etcd missing") {
		t.Fatalf("CheckAssets(no etcd) = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckAssets(dir); err != nil {
		t.Fatalf("CheckAssets(both) = %v", err)
	}
}
