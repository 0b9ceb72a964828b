package testkit

import (
	"os"
	"testing"
)

// SeedFile is the seed policy, repository-relative: the seed case (a uv
// cache on tmpfs, UV_LINK_MODE=copy, an 8Gi pod-level memory headroom and
// the SWE-rebench-V2 asset) as the memory-mode example ships it. Tests read
// this file rather than keep a copy; the chart's default policy is held to
// it (charts' TestDefaultPolicyMatchesExample).
const SeedFile = "examples/policies/memory/sandbox-seed.yaml"

// Seed returns the seed policy file's content.
func Seed(t testing.TB) []byte {
	t.Helper()
	return Read(t, SeedFile)
}

// Read returns the content of the repository file rel, and fails t when it
// cannot be read.
func Read(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
