package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func binaries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, p := range Platforms {
		path := filepath.Join(dir, p.Architecture)
		if err := os.WriteFile(path, []byte("a server binary for "+p.Architecture), 0o755); err != nil {
			t.Fatal(err)
		}
		out[p.OS+"/"+p.Architecture] = path
	}
	return out
}

func digest(t *testing.T, o Options) v1.Hash {
	t.Helper()
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBuildReproducible: the digest follows from the binaries and the
// options alone, and changes with each of them.
func TestBuildReproducible(t *testing.T) {
	o := Options{Binaries: binaries(t), Version: "v1.2.3", Revision: "abc", Source: "https://example.com/repo", Created: time.Unix(1700000000, 0)}
	first := digest(t, o)
	if again := digest(t, o); again != first {
		t.Fatalf("two builds of the same inputs: %s and %s", first, again)
	}
	other := o
	other.Version = "v1.2.4"
	if digest(t, other) == first {
		t.Errorf("another version, the same digest")
	}
	other = o
	other.Created = time.Unix(1700000001, 0)
	if digest(t, other) == first {
		t.Errorf("another creation time, the same digest")
	}
	if err := os.WriteFile(o.Binaries["linux/arm64"], []byte("another binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if digest(t, o) == first {
		t.Errorf("another arm64 binary, the same digest")
	}
}

// TestImage: an OCI index of one image per platform, each configured to
// run the server as nonroot and holding exactly the runtime filesystem.
func TestImage(t *testing.T) {
	o := Options{Binaries: binaries(t), Version: "v1.2.3", Revision: "abc", Source: "https://example.com/repo"}
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != len(Platforms) {
		t.Fatalf("index %s with %d manifests, want an OCI index of %d", m.MediaType, len(m.Manifests), len(Platforms))
	}
	for i, d := range m.Manifests {
		p := Platforms[i]
		if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Architecture {
			t.Errorf("manifest %d: platform %v, want %v", i, d.Platform, p)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != p.OS || cf.Architecture != p.Architecture || c.User != User || !slices.Equal(c.Entrypoint, Entrypoint) ||
			!slices.Equal(c.Cmd, Cmd) || !slices.Equal(c.Env, Env) || !cf.Created.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: config %s/%s user %q entrypoint %q cmd %q env %q created %s", p.Architecture, cf.OS, cf.Architecture, c.User, c.Entrypoint, c.Cmd, c.Env, cf.Created)
		}
		for k, v := range map[string]string{"version": "v1.2.3", "revision": "abc", "source": "https://example.com/repo"} {
			if got := c.Labels["org.opencontainers.image."+k]; got != v {
				t.Errorf("%s: label org.opencontainers.image.%s = %q, want %q", p.Architecture, k, got, v)
			}
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want 1", p.Architecture, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := listTar(t, rc)
		want := []string{
			"etc/ d 755 0", "home/ d 755 0", "home/nonroot/ d 700 65532", "tmp/ d 1777 0",
			"etc/group - 644 0 root:x:0:\nnonroot:x:65532:\n",
			"etc/passwd - 644 0 root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
			"sandbox-webhook - 755 0 a server binary for " + p.Architecture,
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: layer\n%q\nwant\n%q", p.Architecture, got, want)
		}
	}
}

func listTar(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		kind := "-"
		if h.Typeflag == tar.TypeDir {
			kind = "d"
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != h.Gid {
			t.Errorf("%s: mtime %s, uid %d gid %d", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		e := fmt.Sprintf("%s %s %o %d", h.Name, kind, h.Mode, h.Uid)
		if kind == "-" {
			e += " " + string(b)
		}
		out = append(out, e)
	}
}

// TestLayoutAndArchive: the layout reads back as the index built, named
// by its ref, and the archive of it is the same bytes every time.
func TestLayoutAndArchive(t *testing.T) {
	idx, err := Build(Options{Binaries: binaries(t)})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	var archives [][]byte
	for range 2 {
		dir := filepath.Join(t.TempDir(), "oci")
		if err := WriteLayout(dir, idx, "sandbox-webhook:test"); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadLayout(dir); err != nil {
			t.Fatal(err)
		} else if d, _ := got.Digest(); d != want {
			t.Fatalf("ReadLayout: %s, want %s", d, want)
		}
		top, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := top.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 1 || m.Manifests[0].Digest != want || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "sandbox-webhook:test" {
			t.Fatalf("index.json %+v, want the index %s named sandbox-webhook:test", m.Manifests, want)
		}
		path := filepath.Join(t.TempDir(), "image.tar")
		if err := WriteArchive(dir, path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two archives of one index differ")
	}
	names := listTar(t, bytes.NewReader(archives[0]))
	if !strings.HasPrefix(names[0], "blobs/sha256/") || !slices.ContainsFunc(names, func(s string) bool { return strings.HasPrefix(s, "index.json ") }) {
		t.Errorf("archive entries %q, want blobs, index.json and oci-layout", names)
	}
}

// TestSBOM: the SPDX document of a Go binary (cmd/image, which links
// go-containerregistry) names its module and every module linked into it,
// with their purls.
func TestSBOM(t *testing.T) {
	self := filepath.Join(t.TempDir(), "image")
	if out, err := exec.Command("go", "build", "-o", self, "./cmd/image").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/image: %v\n%s", err, out)
	}
	b, err := SBOM(self, "v1.2.3", time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Created     struct {
			Created string `json:"created"`
		} `json:"creationInfo"`
		Packages []struct {
			Name, VersionInfo string
			ExternalRefs      []struct {
				Locator string `json:"referenceLocator"`
			}
		}
		Relationships []struct {
			Type string `json:"relationshipType"`
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.Created.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("spdxVersion %q created %q", doc.SPDXVersion, doc.Created.Created)
	}
	var purls []string
	for _, p := range doc.Packages {
		if len(p.ExternalRefs) != 1 {
			t.Fatalf("package %s has %d refs", p.Name, len(p.ExternalRefs))
		}
		purls = append(purls, p.ExternalRefs[0].Locator)
	}
	for _, want := range []string{"pkg:golang/github.com/sandbox-webhook/sandbox-webhook/hack/image@v1.2.3", "pkg:golang/github.com/google/go-containerregistry@v0.22.1"} {
		if !slices.Contains(purls, want) {
			t.Errorf("no %s among %d packages", want, len(purls))
		}
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%d relationships for %d packages: the document describes main, which depends on the rest", len(doc.Relationships), len(doc.Packages))
	}
	again, _ := SBOM(self, "v1.2.3", time.Unix(1700000000, 0))
	if !bytes.Equal(b, again) {
		t.Errorf("two SBOMs of one binary differ")
	}
}
