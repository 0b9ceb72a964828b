package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// uvCache writes a cache shaped like the one uv leaves in /root/.cache/uv
// after installing a project's dependencies: per package an unpacked wheel
// under archive-v0/<id>/ (the package's modules in subpackages and its
// .dist-info), its wheel entry under wheels-v5/pypi/<name>/ and its index
// page under simple-v16/pypi/, until at least files files are written. File sizes
// follow a log-normal law around a median of 4 KiB (most of a wheel is
// small .py files, a few are hundreds of KiB), capped at 1 MiB. The same
// seed writes the same cache. It returns the files and bytes written.
func uvCache(dir string, files int, seed uint64) (n int, bytes int64, err error) {
	r := rand.New(rand.NewPCG(seed, 0x75766361636865))
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	write := func(path string, size int) error {
		if err := os.WriteFile(path, buf[:size], 0o644); err != nil {
			return err
		}
		n++
		bytes += int64(size)
		return nil
	}
	size := func() int {
		s := int(4096 * math.Exp(1.3*r.NormFloat64()))
		return max(64, min(s, len(buf)))
	}
	for _, f := range []string{"CACHEDIR.TAG", ".gitignore", ".lock"} {
		if err := write(filepath.Join(dir, f), 43); err != nil {
			return n, bytes, err
		}
	}
	for pkg := 0; n < files; pkg++ {
		name := fmt.Sprintf("pkg%03d", pkg)
		archive := filepath.Join(dir, "archive-v0", fmt.Sprintf("%016x%05x", r.Uint64(), pkg))
		// A package of 5 to 80 modules in 1 to 6 subpackages.
		modules := 5 + r.IntN(76)
		subs := 1 + r.IntN(6)
		for s := range subs {
			d := filepath.Join(archive, name)
			if s > 0 {
				d = filepath.Join(d, fmt.Sprintf("sub%d", s))
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return n, bytes, err
			}
			if err := write(filepath.Join(d, "__init__.py"), size()); err != nil {
				return n, bytes, err
			}
		}
		for m := range min(modules, files-n) {
			d := filepath.Join(archive, name)
			if s := m % subs; s > 0 {
				d = filepath.Join(d, fmt.Sprintf("sub%d", s))
			}
			if err := write(filepath.Join(d, fmt.Sprintf("mod%03d.py", m)), size()); err != nil {
				return n, bytes, err
			}
		}
		dist := filepath.Join(archive, name+"-1.0.dist-info")
		if err := os.MkdirAll(dist, 0o755); err != nil {
			return n, bytes, err
		}
		for _, f := range []string{"METADATA", "RECORD", "WHEEL", "top_level.txt", "INSTALLER"} {
			if err := write(filepath.Join(dist, f), 64+r.IntN(8192)); err != nil {
				return n, bytes, err
			}
		}
		wheels := filepath.Join(dir, "wheels-v5", "pypi", name)
		if err := os.MkdirAll(wheels, 0o755); err != nil {
			return n, bytes, err
		}
		if err := write(filepath.Join(wheels, name+"-1.0-py3-none-any.msgpack"), 256+r.IntN(1024)); err != nil {
			return n, bytes, err
		}
		simple := filepath.Join(dir, "simple-v16", "pypi")
		if err := os.MkdirAll(simple, 0o755); err != nil {
			return n, bytes, err
		}
		if err := write(filepath.Join(simple, name+".rkyv"), 1024+r.IntN(16384)); err != nil {
			return n, bytes, err
		}
	}
	return n, bytes, nil
}
