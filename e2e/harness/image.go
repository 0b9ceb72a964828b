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

	return writeOCIArchive(path, NodeImage, "busybox", layer.Bytes(), map[string]any{
		"Env": []string{"PATH=/bin"},
		"Cmd": []string{"/bin/sleep", "2147483647"},
	})
}

// WebhookImage is the name the cluster e2e gives the webhook's image.
const WebhookImage = "localhost/sandbox-webhook:e2e"

// WriteWebhookImage writes an OCI image archive of the webhook, as the
// Dockerfile describes it, to path: the server binary at /sandbox-webhook
// on an empty base with distroless/static's nonroot user (65532) in
// /etc/passwd and a world-writable /tmp, run as that user, entrypoint
// /sandbox-webhook, command serve (WebhookImageConfig; TestWebhookImage
// holds it to the Dockerfile).
func WriteWebhookImage(binary, path string) error {
	b, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"tmp/", 0o1777}, {"home/", 0o755}, {"home/nonroot/", 0o700}} {
		h := &tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: epoch}
		if d.name == "home/nonroot/" {
			h.Uid, h.Gid = 65532, 65532
		}
		if err := lw.WriteHeader(h); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"sandbox-webhook", 0o755, b},
	} {
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := lw.Write(f.data); err != nil {
			return err
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}
	return writeOCIArchive(path, WebhookImage, "e2e", layer.Bytes(), WebhookImageConfig)
}

// WebhookImageConfig is the image configuration the Dockerfile's final
// stage gives: its USER, ENTRYPOINT and CMD.
var WebhookImageConfig = map[string]any{
	"Env":        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	"User":       "65532:65532",
	"Entrypoint": []string{"/sandbox-webhook"},
	"Cmd":        []string{"serve"},
}

// writeOCIArchive writes an OCI image archive (the layout `ctr images
// import` reads) of one image, name, with one layer and the configuration
// imageConfig, to path.
func writeOCIArchive(path, name, ref string, layer []byte, imageConfig map[string]any) error {
	layerDigest := digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       imageConfig,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	if err != nil {
		return err
	}
	md := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	md["platform"] = map[string]string{"architecture": "amd64", "os": "linux"}
	md["annotations"] = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": ref,
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
	epoch := time.Unix(0, 0)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layer), layer},
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
