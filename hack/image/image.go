// Package image assembles the server's container image without a Docker
// engine or a base image to pull: one layer holding the static binary, the
// nonroot user (65532) and a world-writable /tmp, for linux/amd64 and
// linux/arm64 in one OCI index. Every byte follows from the binaries and
// the options, so two builds of one commit have one digest. The
// repository's Dockerfile, for a Docker engine, is written from the same
// definition (Dockerfile).
//
// It is a module of its own, so that go-containerregistry and the Docker
// CLI's configuration code stay out of the webhook's go.mod.
package image

import (
	"archive/tar"
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The runtime configuration.
const (
	// Path is where the binary is in the image.
	Path = "/sandbox-webhook"
	// User is the nonroot user and group of distroless images.
	User = "65532:65532"
)

var (
	Entrypoint = []string{Path}
	Cmd        = []string{"serve"}
	Env        = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
)

// Dir is a directory of the image: its path, mode and owner (uid and gid).
type Dir struct {
	Name string
	Mode int64
	ID   int
}

// Dirs are the image's directories, in the order of the layer.
var Dirs = []Dir{{"/etc", 0o755, 0}, {"/home", 0o755, 0}, {"/home/nonroot", 0o700, 65532}, {"/tmp", 0o1777, 0}}

// Platforms are the platforms the image is built for.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// rootfs holds /etc/passwd and /etc/group; the Dockerfile writes the same
// files.
//
//go:embed rootfs
var rootfs embed.FS

// Options say what an image is built from.
type Options struct {
	// Binaries are the server binaries, by platform ("linux/amd64").
	Binaries map[string]string
	// Version, Revision and Source are the OCI labels
	// org.opencontainers.image.version, .revision and .source.
	Version, Revision, Source string
	// Created is the time the image says it was made: the commit's, so
	// that it follows from the sources; zero is the Unix epoch.
	Created time.Time
}

// Labels are the image's OCI labels.
func (o Options) Labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "sandbox-webhook",
		"org.opencontainers.image.description": "Mutating admission webhook for RL-training sandbox pods",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	for k, v := range map[string]string{"version": o.Version, "revision": o.Revision, "source": o.Source} {
		if v != "" {
			l["org.opencontainers.image."+k] = v
		}
	}
	return l
}

// Build assembles the index of one image per platform of o.Binaries, in the
// order of Platforms.
func Build(o Options) (v1.ImageIndex, error) {
	created := o.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	n := 0
	for _, p := range Platforms {
		bin, ok := o.Binaries[p.OS+"/"+p.Architecture]
		if !ok {
			continue
		}
		n++
		img, err := platformImage(bin, p, o, created)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", p.OS, p.Architecture, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	if n != len(o.Binaries) || n == 0 {
		return nil, fmt.Errorf("binaries for %d platforms, of which %d are among %v", len(o.Binaries), n, Platforms)
	}
	return idx, nil
}

func platformImage(binary string, p v1.Platform, o Options, created time.Time) (v1.Image, error) {
	b, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := Filesystem(b)
	if err != nil {
		return nil, err
	}
	return FromLayer(layerTar, created, "sandbox-webhook image: the server binary, /etc/passwd, /etc/group, /tmp", func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
		cf.Config.User = User
		cf.Config.Entrypoint = slices.Clone(Entrypoint)
		cf.Config.Cmd = slices.Clone(Cmd)
		cf.Config.Env = slices.Clone(Env)
		cf.Config.Labels = o.Labels()
	})
}

// FromLayer is an OCI image of one gzip layer, the tar layerTar, created at
// created by createdBy, whose configuration configure completes.
func FromLayer(layerTar []byte, created time.Time, createdBy string, configure func(*v1.ConfigFile)) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: createdBy}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	configure(cf)
	return mutate.ConfigFile(img, cf)
}

// Filesystem is the image's one layer, as a tar: the binary at Path, the
// files of rootfs, /tmp (1777) and the nonroot user's home, every entry
// owned by root but the home, dated the Unix epoch.
func Filesystem(binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range Dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.Name[1:] + "/", Mode: d.Mode, Uid: d.ID, Gid: d.ID, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	files, err := rootfsFiles()
	if err != nil {
		return nil, err
	}
	files[Path[1:]] = binary
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		mode := int64(0o644)
		if "/"+n == Path {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: mode, Size: int64(len(files[n])), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// rootfsFiles returns the files of rootfs by their path in the image
// ("etc/passwd").
func rootfsFiles() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(rootfs, "rootfs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := rootfs.ReadFile(path)
		files[path[len("rootfs/"):]] = b
		return err
	})
	return files, err
}

// WriteLayout writes idx to dir as an OCI image layout whose index.json
// names it ref, replacing what dir held: as the OCI layout names it
// (org.opencontainers.image.ref.name) and as containerd's import does
// (io.containerd.image.name).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	}))
}

// ReadLayout returns the index WriteLayout wrote to dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d indexes, want the one `make image` writes", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// WriteArchive writes the OCI layout in dir as a tar archive, the form
// `ctr images import` reads, with its entries sorted and dated the epoch.
func WriteArchive(dir, path string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			f.Close()
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
