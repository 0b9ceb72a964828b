package harness

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandbox-webhook/sandbox-webhook/hack/image"
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

// WriteBusyboxImage writes an OCI image archive (what `ctr images import`
// reads) of NodeImage to path, with busybox as its only binary. Its default
// command sleeps, so it also serves as the pod sandbox image.
func WriteBusyboxImage(busybox, path string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("reading the static busybox (apt-get install busybox-static): %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"bin/", "tmp/", "root/", "proc/", "sys/", "dev/", "etc/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := tw.Write(bb); err != nil {
		return err
	}
	for _, a := range busyboxApplets {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	img, err := image.FromLayer(buf.Bytes(), epoch, "the node image: a static busybox", func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture = "linux", runtime.GOARCH
		cf.Config.Env = []string{"PATH=/bin"}
		cf.Config.Cmd = []string{"/bin/sleep", "2147483647"}
	})
	if err != nil {
		return err
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}})
	return writeArchive(idx, NodeImage, path)
}

// writeArchive writes idx, named ref, as an OCI image archive at path.
func writeArchive(idx v1.ImageIndex, ref, path string) error {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	layout := filepath.Join(dir, "oci")
	if err := image.WriteLayout(layout, idx, ref); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return image.WriteArchive(layout, path)
}
