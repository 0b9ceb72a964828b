package release

import (
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImageReproducible runs `make image` twice, into two directories, and
// wants one digest: every byte of the image follows from the commit. Each
// build holds both platforms.
func TestImageReproducible(t *testing.T) {
	var digests []string
	for _, out := range []string{"a", "b"} {
		dir := filepath.Join(t.TempDir(), out)
		cmd := exec.Command("make", "image", "IMAGE=sandbox-webhook:test", "VERSION=v0.0.0-test", "IMAGE_OUT="+dir)
		cmd.Env = append(os.Environ(), "MAKEFLAGS=")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make image: %v\n%s", err, b)
		}
		m := regexp.MustCompile(`(?m)^sandbox-webhook:test (sha256:[0-9a-f]{64})$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("make image printed no digest:\n%s", b)
		}
		for _, p := range []string{"linux/amd64", "linux/arm64"} {
			if !regexp.MustCompile(`(?m)^` + p + ` sha256:`).Match(b) {
				t.Errorf("make image built no %s image:\n%s", p, b)
			}
		}
		for _, f := range []string{"oci/index.json", "sandbox-webhook.tar", "sbom-linux-amd64.spdx.json", "sbom-linux-arm64.spdx.json"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Error(err)
			}
		}
		digests = append(digests, string(m[1]))
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of one commit: %s and %s", digests[0], digests[1])
	}
}

// TestImagePush pushes with `make push` to a registry on loopback that
// wants the credentials of a Docker CLI config, as a private registry
// would, and reads the index back: the digest `make image` printed, both
// platforms.
func TestImagePush(t *testing.T) {
	const user, password = "platform", "s3cret"
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	config := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	if err := os.WriteFile(filepath.Join(config, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := host + "/platform/sandbox-webhook:v0.0.0-test"
	cmd := exec.Command("make", "push", "IMAGE="+ref, "VERSION=v0.0.0-test", "PUSH_FLAGS=-insecure", "IMAGE_OUT="+t.TempDir())
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "DOCKER_CONFIG="+config)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make push: %v\n%s", err, b)
	}
	built := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(ref) + ` (sha256:[0-9a-f]{64})$`).FindSubmatch(b)
	if built == nil {
		t.Fatalf("make push printed no digest:\n%s", b)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r, remote.WithAuth(&authn.Basic{Username: user, Password: password}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != string(built[1]) {
		t.Errorf("the registry holds %s, make image built %s", d, built[1])
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range m.Manifests {
		platforms = append(platforms, desc.Platform.String())
	}
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("pushed platforms %v", platforms)
	}
}
