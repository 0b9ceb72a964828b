package testkit

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

var kubernetesRequire = regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v1\.(\d+)\.`)

// KubeMinors returns the oldest and the newest Kubernetes minor (1.NN) the
// e2e version matrix proves: the newest is the k8s.io/kubernetes e2e/tools
// pins for the whole suite, the oldest that of the oldest module
// e2e/tools/k8s-1.NN that `make e2e-matrix` runs kube-apiserver from.
func KubeMinors(t testing.TB) (oldest, newest int) {
	t.Helper()
	m := kubernetesRequire.FindSubmatch(Read(t, "e2e/tools/go.mod"))
	if m == nil {
		t.Fatal("e2e/tools/go.mod requires no k8s.io/kubernetes v1.NN")
	}
	newest, _ = strconv.Atoi(string(m[1]))
	dirs, err := filepath.Glob(Path("e2e/tools/k8s-1.*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no e2e/tools/k8s-1.NN modules (%v)", err)
	}
	oldest = newest
	for _, d := range dirs {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(d), "k8s-1.%d", &n); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		oldest = min(oldest, n)
	}
	return oldest, newest
}
