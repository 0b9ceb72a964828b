package imageref

import "testing"

func TestRewrite(t *testing.T) {
	rules := []Rule{
		{From: "docker.io/library", To: "mirror.example.com/official"},
		{From: "docker.io", To: "mirror.example.com/dockerhub"},
		{From: "ghcr.io/org", To: "mirror.example.com:5000/ghcr/org"},
	}
	const digest = "sha256:4d2b8f5d5e0d8c04cba1d0d1f1c8a1e0b6d2e2b1b5e8f8b7a6c6d5e4f3a2b1c0"
	for _, tc := range []struct{ image, want string }{
		{"busybox", "mirror.example.com/official/busybox"},
		{"busybox:1.36", "mirror.example.com/official/busybox:1.36"},
		{"docker.io/library/busybox@" + digest, "mirror.example.com/official/busybox@" + digest},
		{"index.docker.io/library/busybox:1.36@" + digest, "mirror.example.com/official/busybox:1.36@" + digest},
		{"bitnami/redis:7", "mirror.example.com/dockerhub/bitnami/redis:7"},
		{"ghcr.io/org/tool:v1", "mirror.example.com:5000/ghcr/org/tool:v1"},
		{"ghcr.io/organisation/tool", "ghcr.io/organisation/tool"}, // a path component, not a string prefix
		{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"mirror.example.com/official/busybox", "mirror.example.com/official/busybox"},
	} {
		got, _, err := Rewrite(tc.image, rules)
		if err != nil || got != tc.want {
			t.Errorf("Rewrite(%q) = %q, %v; want %q", tc.image, got, err, tc.want)
		}
		// Idempotent: the rewritten image is not rewritten again.
		if again, i, err := Rewrite(got, rules); tc.image != got && (err != nil || again != got || i >= 0) {
			t.Errorf("Rewrite(%q) again = %q, %d, %v", got, again, i, err)
		}
	}
	for _, bad := range []string{"Busybox", "busybox@sha256:short", " busybox", "a//b"} {
		if got, i, err := Rewrite(bad, rules); err == nil {
			t.Errorf("Rewrite(%q) = %q, %d; want an error", bad, got, i)
		}
	}
	long := "mirror.example.com/"
	for len(long) < 260 { // the path alone may have 255 characters
		long += "aaaaaaaaaa"
	}
	if got, _, err := Rewrite("busybox", []Rule{{From: "docker.io", To: long}}); err == nil {
		t.Errorf("a rewrite past the name length limit: %q", got)
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, ok := range []string{"docker.io", "docker.io/library", "ghcr.io/org", "mirror.example.com:5000/x/y", "localhost:5000"} {
		if why := CheckPrefix(ok); why != "" {
			t.Errorf("CheckPrefix(%q) = %q", ok, why)
		}
	}
	for _, bad := range []string{"", "library", "index.docker.io", "docker.io/library/busybox:1", "ghcr.io/Org", "ghcr.io/org/", "https://ghcr.io"} {
		if why := CheckPrefix(bad); why == "" {
			t.Errorf("CheckPrefix(%q) accepted", bad)
		}
	}
}
