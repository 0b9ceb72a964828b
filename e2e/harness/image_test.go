package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestWriteBusyboxImage reads the archive back as `ctr images import` would:
// index → manifest → config and layer, every blob under its digest, and the
// layer holding the binary and its applet links.
func TestWriteBusyboxImage(t *testing.T) {
	dir := t.TempDir()
	bb := filepath.Join(dir, "busybox")
	if err := os.WriteFile(bb, []byte("not really busybox"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.tar")
	if err := WriteBusyboxImage(bb, archive); err != nil {
		t.Fatal(err)
	}
	files, manifest := readImage(t, archive, NodeImage)
	var config struct {
		Config struct{ Cmd []string } `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	mustUnmarshal(t, blob(t, files, manifest.Config.Digest), &config)
	if len(manifest.Layers) != 1 || !slices.Equal(config.RootFS.DiffIDs, []string{digest(layerTar(t, files, manifest))}) {
		t.Fatalf("want one layer whose uncompressed digest is its diff_id: layers %+v, diff_ids %v", manifest.Layers, config.RootFS.DiffIDs)
	}
	if !slices.Equal(config.Config.Cmd, []string{"/bin/sleep", "2147483647"}) {
		t.Errorf("default command %v: the sandbox image must sleep", config.Config.Cmd)
	}
	layer := readTar(t, layerTar(t, files, manifest))
	if string(layer["bin/busybox"]) != "not really busybox" {
		t.Errorf("bin/busybox: got %q", layer["bin/busybox"])
	}
	for _, a := range []string{"sh", "sleep", "dd", "cat", "tr", "touch"} {
		if _, ok := layer["bin/"+a]; !ok {
			t.Errorf("bin/%s missing from the layer", a)
		}
	}
}

// imageManifest is the part of an OCI manifest the tests read.
type imageManifest struct {
	Config struct{ Digest string } `json:"config"`
	Layers []struct {
		Digest    string
		MediaType string
	} `json:"layers"`
}

// readImage reads an image archive as `ctr images import` would: every
// blob under its digest, index.json naming one index as name, and in it
// the manifest of this machine's platform.
func readImage(t *testing.T, archive, name string) (map[string][]byte, imageManifest) {
	t.Helper()
	files := readTar(t, mustRead(t, archive))
	for file, data := range files {
		if d, ok := bytes.CutPrefix([]byte(file), []byte("blobs/sha256/")); ok && len(d) > 0 {
			if got := digest(data); got != "sha256:"+string(d) {
				t.Errorf("blob %s has digest %s", file, got)
			}
		}
	}
	type index struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
			Platform    struct{ OS, Architecture string }
		} `json:"manifests"`
	}
	var top, images index
	mustUnmarshal(t, files["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["io.containerd.image.name"] != name ||
		top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json: want one image index named %s, got %+v", name, top.Manifests)
	}
	mustUnmarshal(t, blob(t, files, top.Manifests[0].Digest), &images)
	if len(images.Manifests) != 1 || images.Manifests[0].Platform.OS != "linux" || images.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("want one manifest for linux/%s, got %+v", runtime.GOARCH, images.Manifests)
	}
	var manifest imageManifest
	mustUnmarshal(t, blob(t, files, images.Manifests[0].Digest), &manifest)
	return files, manifest
}

// layerTar is the one layer of manifest, uncompressed.
func layerTar(t *testing.T, files map[string][]byte, m imageManifest) []byte {
	t.Helper()
	if len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("layers %+v, want one gzip layer", m.Layers)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, m.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestWriteBusyboxImageMissingBinary(t *testing.T) {
	err := WriteBusyboxImage(filepath.Join(t.TempDir(), "none"), filepath.Join(t.TempDir(), "image.tar"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want a not-exist error naming busybox-static, got %v", err)
	}
}

func readTar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	r := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = data
	}
}

func blob(t *testing.T, files map[string][]byte, d string) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+d[len("sha256:"):]]
	if !ok {
		t.Fatalf("no blob %s in the archive", d)
	}
	return b
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
