package harness

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// NodeImage is the one image the node e2e runs, both as every container and
// as containerd's sandbox (pause) image: a static busybox, imported from a
// local OCI archive since no registry is reachable.
const NodeImage = "localhost/sandbox-webhook-node:busybox"

// busyboxApplets are linked to /bin/busybox in the image so that container
// commands and probe scripts can name them directly.
var busyboxApplets = []string{
	"sh", "cat", "dd", "echo", "env", "grep", "head", "ls", "mkdir", "rm",
	"sleep", "stat", "sync", "tail", "touch", "tr", "true", "wc",
}

// WriteBusyboxImage writes an OCI image archive (the layout `ctr images
// import` reads) of NodeImage to path, with busybox as its only binary. Its
// default command sleeps, so it also serves as the pod sandbox image.
func WriteBusyboxImage(busybox, path string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("reading the static busybox (apt-get install busybox-static): %w", err)
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"bin/", "tmp/", "root/", "proc/", "sys/", "dev/", "etc/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := lw.Write(bb); err != nil {
		return err
	}
	for _, a := range busyboxApplets {
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}

	layerDigest := digest(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env": []string{"PATH=/bin"},
			"Cmd": []string{"/bin/sleep", "2147483647"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer.Bytes())},
	})
	if err != nil {
		return err
	}
	md := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	md["platform"] = map[string]string{"architecture": "amd64", "os": "linux"}
	md["annotations"] = map[string]string{
		"io.containerd.image.name":          NodeImage,
		"org.opencontainers.image.ref.name": "busybox",
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{md},
	})
	if err != nil {
		return err
	}

	var out bytes.Buffer
	w := tar.NewWriter(&out)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layer.Bytes()), layer.Bytes()},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := w.Write(f.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(b []byte) string {
	sum := sha256.Sum256(b)
	return "blobs/sha256/" + hex.EncodeToString(sum[:])
}

func descriptor(mediaType string, b []byte) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": digest(b), "size": len(b)}
}
