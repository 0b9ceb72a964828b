//go:build arm64e2e

package e2e

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-webhook/sandbox-webhook/hack/image"
)

// TestArm64Corpus runs the golden corpus through the API server against the
// arm64 server binary taken from the image `make image` built
// (ARM64_IMAGE, its OCI layout), under Debian's qemu-user-static
// (QEMU_AARCH64): the API server sends it real admissions, and the pods it
// stores must be the goldens the amd64 binary gives. Run by `make arm64-e2e`.
func TestArm64Corpus(t *testing.T) {
	dir, qemu := os.Getenv("ARM64_IMAGE"), os.Getenv("QEMU_AARCH64")
	if dir == "" || qemu == "" {
		t.Fatal("ARM64_IMAGE (the image's OCI layout) and QEMU_AARCH64 (qemu-aarch64-static) are needed: run `make arm64-e2e`")
	}
	bin := filepath.Join(t.TempDir(), "sandbox-webhook-arm64")
	if err := extractArm64(dir, bin); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	machine := f.Machine
	f.Close()
	if machine != elf.EM_AARCH64 {
		t.Fatalf("the image's arm64 binary is for %s", machine)
	}
	// The harness starts "the server binary": here a script that has qemu
	// run the arm64 one in its place (exec: signals reach qemu, which
	// passes them on).
	wrapper := filepath.Join(t.TempDir(), "sandbox-webhook")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+qemu+" "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(wrapper, "version").CombinedOutput(); err != nil {
		t.Fatalf("the arm64 binary under qemu: %v\n%s", err, out)
	}
	amd64 := suite.binary
	suite.binary = wrapper
	t.Cleanup(func() { suite.binary = amd64 })

	// Proof that the webhooks answering are the arm64 binary: while the
	// corpus runs, a qemu process runs it as "serve".
	seen := make(chan bool, 1)
	stop := make(chan struct{})
	go func() {
		found := false
		for !found {
			select {
			case <-stop:
				seen <- false
				return
			case <-time.After(100 * time.Millisecond):
			}
			found = runsServe(qemu, bin)
		}
		<-stop
		seen <- true
	}()
	TestCorpus(t)
	close(stop)
	if !<-seen {
		t.Errorf("no %s %s serve process ran during the corpus", qemu, bin)
	}
}

// runsServe reports whether a process runs `qemu bin serve ...`.
func runsServe(qemu, bin string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[0] == qemu && args[1] == bin && args[2] == "serve" {
			return true
		}
	}
	return false
}

// extractArm64 writes the server binary of the linux/arm64 image in the
// OCI layout dir to path.
func extractArm64(dir, path string) error {
	idx, err := image.ReadLayout(dir)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.Architecture != "arm64" {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		if len(layers) != 1 {
			return errors.New("want the image's one layer")
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			return err
		}
		defer rc.Close()
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				return err
			}
			if "/"+h.Name != image.Path {
				continue
			}
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
	}
	return errors.New("no linux/arm64 image in " + dir)
}
