// Command uvinstall does, in a sandbox pod of make io-bench (docs/io.md),
// the file-system work of a cold `uv pip install`: for each wheel it unpacks
// the files into the uv cache (a temporary directory renamed into
// archive-v0/, as uv does), then links them into the virtual environment as
// UV_LINK_MODE says: hardlinks when it is unset or "hardlink" (uv's default
// on Linux), falling back to copies when the cache is on another file system
// (as uv does, with a warning), and copies when it is "copy". The wheels'
// shapes (directories, files and sizes) are those of wheels.txt; the bytes
// are arbitrary, since no package index is reachable.
//
// It reports, on stdout and in the container's termination message, how long
// the install took and what it wrote.
package main

import (
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

//go:embed wheels.txt
var wheels string

// result is what the pod reports.
type result struct {
	Seconds float64 `json:"seconds"`
	// Files and Bytes are what the wheels hold; each is written once into
	// the cache and then linked or copied once into the environment.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// LinkMode is UV_LINK_MODE as read; Copied counts files copied (all of
	// them in copy mode, or after a hardlink failed across file systems).
	LinkMode string `json:"linkMode"`
	Copied   int    `json:"copied"`
}

func main() {
	cache := flag.String("cache", envOr("UV_CACHE_DIR", "/root/.cache/uv"), "the uv cache")
	target := flag.String("target", "/venv/lib/python3.11/site-packages", "the environment's site-packages")
	flag.Parse()
	r, err := install(*cache, *target, os.Getenv("UV_LINK_MODE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "uvinstall:", err)
		_ = os.WriteFile("/dev/termination-log", []byte(err.Error()), 0o644)
		os.Exit(1)
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	// The kubelet reads the termination message from here by default.
	_ = os.WriteFile("/dev/termination-log", b, 0o644)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// wheel is one package's directories, each with its files' sizes.
type wheel struct {
	name string
	dirs []dir
}

type dir struct {
	path  string
	sizes []int64
}

func parse(text string) ([]wheel, error) {
	var out []wheel
	for i, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("wheels.txt:%d: want package, directory and sizes", i+1)
		}
		d := dir{path: f[1]}
		for _, s := range strings.Fields(f[2]) {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("wheels.txt:%d: %w", i+1, err)
			}
			d.sizes = append(d.sizes, n)
		}
		if len(out) == 0 || out[len(out)-1].name != f[0] {
			out = append(out, wheel{name: f[0]})
		}
		out[len(out)-1].dirs = append(out[len(out)-1].dirs, d)
	}
	return out, nil
}

func install(cache, target, linkMode string) (result, error) {
	r := result{LinkMode: linkMode}
	ws, err := parse(wheels)
	if err != nil {
		return r, err
	}
	buf := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	start := time.Now()
	for _, w := range ws {
		archive := filepath.Join(cache, "archive-v0", fmt.Sprintf("%s-%016x", w.name, rng.Uint64()))
		if err := unpack(w, cache, archive, buf, &r); err != nil {
			return r, err
		}
		if err := link(w, archive, target, linkMode, &r); err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// fileName names a wheel's i-th file of a directory; the package's name
// keeps two wheels that share a directory (site-packages itself, or
// pandas and its compiled half) apart.
func fileName(w wheel, i int) string { return fmt.Sprintf("%s-%04d", w.name, i) }

// unpack writes the wheel's files into a temporary directory of the cache
// and renames it into place.
func unpack(w wheel, cache, archive string, buf []byte, r *result) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(cache, ".tmp")
	if err != nil {
		return err
	}
	for _, d := range w.dirs {
		p := filepath.Join(tmp, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		for i, size := range d.sizes {
			if err := writeFile(filepath.Join(p, fileName(w, i)), size, buf); err != nil {
				return err
			}
			r.Files++
			r.Bytes += size
		}
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, archive)
}

func writeFile(path string, size int64, buf []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		size -= n
	}
	return f.Close()
}

// link puts the wheel's files from the cache into the environment.
func link(w wheel, archive, target, linkMode string, r *result) error {
	for _, d := range w.dirs {
		dst := filepath.Join(target, d.path)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		for i := range d.sizes {
			from, to := filepath.Join(archive, d.path, fileName(w, i)), filepath.Join(dst, fileName(w, i))
			if linkMode != "copy" {
				err := os.Link(from, to)
				if err == nil {
					continue
				}
				if !errors.Is(err, syscall.EXDEV) {
					return err
				}
			}
			if err := copyFile(from, to); err != nil {
				return err
			}
			r.Copied++
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
