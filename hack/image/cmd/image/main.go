// Command image builds the server's container image without a Docker
// engine (package image, this module's root) and pushes it, for `make
// image` and `make push`, and writes the Dockerfile from the same
// definition, for `make dockerfile`. Run it in hack/image:
//
//	go run ./cmd/image build -out DIR -binary linux/amd64=PATH -binary linux/arm64=PATH \
//	    -version V -revision R -source URL -created UNIX -ref NAME:TAG
//	go run ./cmd/image push [-insecure] -layout DIR/oci REF
//	go run ./cmd/image dockerfile -out PATH
//
// build writes DIR/oci (an OCI image layout), DIR/sandbox-webhook.tar (the
// same as an archive, what `ctr images import` reads) and, per platform,
// DIR/sbom-OS-ARCH.spdx.json; it prints the index's digest. push sends the
// index to REF with the credentials the Docker CLI and crane use.
// dockerfile writes the Dockerfile that builds the same filesystem with a
// Docker engine.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/sandbox-webhook/sandbox-webhook/hack/image"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push|dockerfile [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "push":
		err = push(os.Args[2:])
	case "dockerfile":
		err = dockerfile(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: build, push or dockerfile", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// platformFlag collects -binary OS/ARCH=PATH.
type platformFlag map[string]string

func (p platformFlag) String() string { return fmt.Sprint(map[string]string(p)) }

func (p platformFlag) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("want OS/ARCH=PATH")
	}
	p[platform] = path
	return nil
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	binaries := platformFlag{}
	fs.Var(binaries, "binary", "OS/ARCH=PATH of a server binary (repeat per platform)")
	out := fs.String("out", "_output/image", "output directory")
	ref := fs.String("ref", "sandbox-webhook:dev", "the image's name in the layout and archive")
	var o image.Options
	fs.StringVar(&o.Version, "version", "", "org.opencontainers.image.version")
	fs.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision")
	fs.StringVar(&o.Source, "source", "", "org.opencontainers.image.source")
	created := fs.String("created", "0", "the image's creation time, Unix seconds (the commit's)")
	_ = fs.Parse(args)
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	o.Created, o.Binaries = time.Unix(secs, 0), binaries
	idx, err := image.Build(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	dir := filepath.Join(*out, "oci")
	if err := image.WriteLayout(dir, idx, *ref); err != nil {
		return err
	}
	if err := image.WriteArchive(dir, filepath.Join(*out, "sandbox-webhook.tar")); err != nil {
		return err
	}
	for platform, bin := range binaries {
		sbom, err := image.SBOM(bin, o.Version, o.Created)
		if err != nil {
			return fmt.Errorf("SBOM of %s: %w", bin, err)
		}
		if err := os.WriteFile(filepath.Join(*out, "sbom-"+strings.ReplaceAll(platform, "/", "-")+".spdx.json"), sbom, 0o644); err != nil {
			return err
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		size := int64(0)
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		for _, l := range layers {
			n, err := l.Size()
			if err != nil {
				return err
			}
			size += n
		}
		fmt.Printf("%s/%s %s (layers %d bytes compressed)\n", d.Platform.OS, d.Platform.Architecture, d.Digest, size)
	}
	fmt.Printf("%s %s\n", *ref, digest)
	return nil
}

func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "_output/image/oci", "the OCI layout `make image` wrote")
	insecure := fs.Bool("insecure", false, "allow a registry over plain HTTP")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("push: one image reference, e.g. ghcr.io/org/sandbox-webhook:v1.2.3")
	}
	var opts []name.Option
	if *insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(fs.Arg(0), opts...)
	if err != nil {
		return err
	}
	idx, err := image.ReadLayout(*dir)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	digest, _ := idx.Digest()
	fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
	return nil
}

func dockerfile(args []string) error {
	fs := flag.NewFlagSet("dockerfile", flag.ExitOnError)
	out := fs.String("out", "Dockerfile", "the file to write")
	_ = fs.Parse(args)
	b, err := image.Dockerfile()
	if err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}
