package harness

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
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
	if len(manifest.Layers) != 1 || !slices.Equal(config.RootFS.DiffIDs, []string{manifest.Layers[0].Digest}) {
		t.Fatalf("want one uncompressed layer whose digest is its diff_id: layers %+v, diff_ids %v", manifest.Layers, config.RootFS.DiffIDs)
	}
	if !slices.Equal(config.Config.Cmd, []string{"/bin/sleep", "2147483647"}) {
		t.Errorf("default command %v: the sandbox image must sleep", config.Config.Cmd)
	}
	layer := readTar(t, blob(t, files, manifest.Layers[0].Digest))
	if string(layer["bin/busybox"]) != "not really busybox" {
		t.Errorf("bin/busybox: got %q", layer["bin/busybox"])
	}
	for _, a := range []string{"sh", "sleep", "dd", "cat", "tr", "touch"} {
		if _, ok := layer["bin/"+a]; !ok {
			t.Errorf("bin/%s missing from the layer", a)
		}
	}
}

// TestWriteWebhookImage reads the webhook's image back: named
// WebhookImage, configured as WebhookImageConfig (the Dockerfile's, per
// TestDockerfileStages), the binary at /sandbox-webhook and the nonroot
// user in /etc/passwd.
func TestWriteWebhookImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox-webhook")
	if err := os.WriteFile(bin, []byte("not really the server"), 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.tar")
	if err := WriteWebhookImage(bin, archive); err != nil {
		t.Fatal(err)
	}
	files, manifest := readImage(t, archive, WebhookImage)
	var config struct {
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
		} `json:"config"`
	}
	mustUnmarshal(t, blob(t, files, manifest.Config.Digest), &config)
	c := config.Config
	if c.User != WebhookImageConfig["User"] || !slices.Equal(c.Entrypoint, WebhookImageConfig["Entrypoint"].([]string)) || !slices.Equal(c.Cmd, WebhookImageConfig["Cmd"].([]string)) {
		t.Errorf("image config %+v, want %v", c, WebhookImageConfig)
	}
	layer := readTar(t, blob(t, files, manifest.Layers[0].Digest))
	if string(layer["sandbox-webhook"]) != "not really the server" {
		t.Errorf("/sandbox-webhook: got %q", layer["sandbox-webhook"])
	}
	if !bytes.Contains(layer["etc/passwd"], []byte("nonroot:x:65532:65532:")) {
		t.Errorf("/etc/passwd has no nonroot user: %q", layer["etc/passwd"])
	}
}

// imageManifest is the part of an OCI manifest the tests read.
type imageManifest struct {
	Config struct{ Digest string }   `json:"config"`
	Layers []struct{ Digest string } `json:"layers"`
}

// readImage reads an image archive as `ctr images import` would: every
// blob under its digest, index.json naming one manifest as name, and that
// manifest.
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
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	mustUnmarshal(t, files["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != name {
		t.Fatalf("index.json: want one manifest named %s, got %+v", name, index.Manifests)
	}
	var manifest imageManifest
	mustUnmarshal(t, blob(t, files, index.Manifests[0].Digest), &manifest)
	return files, manifest
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
