package policy

import "testing"

// TestAllowHostPaths: with --allowed-host-path, a hostPath asset outside
// every allowed directory is an error in Load's format; image assets and
// paths inside are not; no allowed directories allows what validation does.
func TestAllowHostPaths(t *testing.T) {
	set, err := ParseSet("p.yaml", []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: assets}
spec:
  match: {namespaces: [rl]}
  assets:
  - {name: inside, mountPath: /a, hostPath: {path: /mnt/shared/rebench}}
  - {name: same, mountPath: /b, hostPath: {path: /mnt/shared}}
  - {name: prefix-only, mountPath: /c, hostPath: {path: /mnt/shared-other}}
  - {name: outside, mountPath: /d, hostPath: {path: /data/x}}
  - {name: image, mountPath: /e, image: {reference: registry.example/data:1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := AllowHostPaths(set, nil); err != nil {
		t.Errorf("no allow-list: %v", err)
	}
	want := `p.yaml (assets): spec.assets[2].hostPath.path: Invalid value: "/mnt/shared-other": must lie under an --allowed-host-path: /mnt/shared, /srv/data
p.yaml (assets): spec.assets[3].hostPath.path: Invalid value: "/data/x": must lie under an --allowed-host-path: /mnt/shared, /srv/data`
	if err := AllowHostPaths(set, []string{"/mnt/shared", "/srv/data"}); err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	for _, bad := range []string{"/", "mnt", "/mnt/../etc", "/mnt/"} {
		if CheckAllowedHostPaths([]string{bad}) == nil {
			t.Errorf("--allowed-host-path %q accepted", bad)
		}
	}
	if err := CheckAllowedHostPaths([]string{"/mnt/shared"}); err != nil {
		t.Error(err)
	}
}
