package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestUVCache: the cache has about the files asked for, in the uv layout, and the
// same seed writes the same cache.
func TestUVCache(t *testing.T) {
	tree := func(seed uint64) map[string]int64 {
		dir := t.TempDir()
		n, total, err := uvCache(dir, 1500, seed)
		if err != nil {
			t.Fatal(err)
		}
		// The last package is written whole: its __init__.py files (up to 6)
		// and its .dist-info, wheel and index entries (7) may go over.
		if n < 1500 || n > 1500+13 {
			t.Errorf("wrote %d files, want 1500 to 1513", n)
		}
		files := map[string]int64{}
		var sum int64
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			rel, _ := filepath.Rel(dir, path)
			files[rel] = info.Size()
			sum += info.Size()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != n || sum != total {
			t.Errorf("on disk: %d files, %d bytes; reported %d, %d", len(files), sum, n, total)
		}
		for _, d := range []string{"archive-v0", "wheels-v5/pypi", "simple-v16/pypi"} {
			if _, err := os.Stat(filepath.Join(dir, d)); err != nil {
				t.Error(err)
			}
		}
		// Small files, as a wheel's modules are: a few KiB on average.
		if avg := total / int64(n); avg < 2<<10 || avg > 32<<10 {
			t.Errorf("average file size %d bytes, want a few KiB", avg)
		}
		return files
	}
	a, b, c := tree(1), tree(1), tree(2)
	if !equal(a, b) {
		t.Error("the same seed wrote different caches")
	}
	if equal(a, c) {
		t.Error("different seeds wrote the same cache")
	}
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCPIO: the initramfs is newc cpio, as the kernel unpacks it: each
// entry's header, name and data, 4-byte aligned, and the trailer.
func TestCPIO(t *testing.T) {
	var w cpioWriter
	w.add("dev", 0o040755, nil, 0, 0)
	w.add("dev/console", 0o020600, nil, 5, 1)
	w.add("init", 0o100755, []byte("#!x"), 0, 0)
	w.add("TRAILER!!!", 0, nil, 0, 0)
	b := w.buf.Bytes()
	type entry struct {
		name               string
		mode, major, minor int64
		data               string
	}
	var got []entry
	for len(b) > 0 {
		if len(b) < 110 || !bytes.HasPrefix(b, []byte("070701")) {
			t.Fatalf("no newc header at %q", b[:min(len(b), 16)])
		}
		field := func(i int) int64 {
			v, err := strconv.ParseInt(string(b[6+8*i:14+8*i]), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		size, namesize := field(6), field(11)
		e := entry{name: string(b[110 : 110+namesize-1]), mode: field(1), major: field(9), minor: field(10)}
		off := (110 + namesize + 3) &^ 3
		e.data = string(b[off : off+size])
		got = append(got, e)
		b = b[(off+size+3)&^3:]
	}
	want := []entry{
		{"dev", 0o040755, 0, 0, ""},
		{"dev/console", 0o020600, 5, 1, ""},
		{"init", 0o100755, 0, 0, "#!x"},
		{"TRAILER!!!", 0, 0, 0, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
