package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// initramfsMain writes the guest's initramfs: this program as /init, the
// modules --load names with what they depend on (read from each module's
// .modinfo, so no depmod is needed), an order file to load them by, and
// the directories and console the init needs.
func initramfsMain(args []string) error {
	fs := flag.NewFlagSet("initramfs", flag.ContinueOnError)
	modules := fs.String("modules", "", "a kernel's /lib/modules/RELEASE directory")
	load := fs.String("load", "", "modules to load, comma-separated")
	out := fs.String("out", "", "the initramfs to write (newc cpio)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *modules == "" || *out == "" {
		return errors.New("--modules and --out are required")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	init, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	mods, err := resolveModules(*modules, strings.Split(*load, ","))
	if err != nil {
		return err
	}
	var w cpioWriter
	for _, d := range []string{"dev", "proc", "sys", "node", "modules"} {
		w.add(d, 0o040755, nil, 0, 0)
	}
	w.add("dev/console", 0o020600, nil, 5, 1)
	w.add("init", 0o100755, init, 0, 0)
	var order []string
	for _, m := range mods {
		b, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		name := filepath.Base(m)
		w.add("modules/"+name, 0o100644, b, 0, 0)
		order = append(order, name)
	}
	w.add("modules/order", 0o100644, []byte(strings.Join(order, "\n")+"\n"), 0, 0)
	w.add("TRAILER!!!", 0, nil, 0, 0)
	fmt.Fprintf(os.Stderr, "initramfs %s: modules %s\n", *out, strings.Join(order, " "))
	return os.WriteFile(*out, w.buf.Bytes(), 0o644)
}

// resolveModules returns the files of the named modules and of what they
// depend on, dependencies first. Modules built into the kernel (not found
// as files) are left out.
func resolveModules(dir string, names []string) ([]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		if name, ok := strings.CutSuffix(strings.TrimSuffix(base, ".xz"), ".ko"); ok {
			files[strings.ReplaceAll(name, "-", "_")] = path
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var order []string
	seen := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		name = strings.ReplaceAll(name, "-", "_")
		if seen[name] {
			return nil
		}
		seen[name] = true
		path, ok := files[name]
		if !ok {
			return nil // built in
		}
		deps, err := moduleDepends(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, path)
		return nil
	}
	for _, n := range names {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if _, ok := files[strings.ReplaceAll(n, "-", "_")]; !ok {
			builtin, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
			if err != nil || !bytes.Contains(builtin, []byte("/"+n+".ko\n")) {
				return nil, fmt.Errorf("module %s: neither in %s nor built in", n, dir)
			}
			continue
		}
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleDepends reads the depends= entry of a module's .modinfo section;
// a compressed module is read through xz.
func moduleDepends(path string) ([]string, error) {
	var r io.ReaderAt
	if strings.HasSuffix(path, ".xz") {
		b, err := exec.Command("xz", "-dc", path).Output()
		if err != nil {
			return nil, fmt.Errorf("xz: %w", err)
		}
		r = bytes.NewReader(b)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	e, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	s := e.Section(".modinfo")
	if s == nil {
		return nil, errors.New("no .modinfo section")
	}
	info, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(v) > 0 {
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// cpioWriter writes the newc cpio format the kernel unpacks an initramfs
// from.
type cpioWriter struct {
	buf bytes.Buffer
	ino int
}

func (w *cpioWriter) add(name string, mode int, data []byte, rdevMajor, rdevMinor int) {
	w.ino++
	nlink := 1
	if mode&0o040000 != 0 {
		nlink = 2
	}
	fmt.Fprintf(&w.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		w.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	w.buf.WriteString(name)
	w.buf.WriteByte(0)
	w.pad()
	w.buf.Write(data)
	w.pad()
}

func (w *cpioWriter) pad() {
	for w.buf.Len()%4 != 0 {
		w.buf.WriteByte(0)
	}
}
