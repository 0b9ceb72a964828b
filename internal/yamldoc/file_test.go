package yamldoc

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadFile: a file is read whole up to MaxBytes and refused beyond;
// a device, a FIFO, a socket or a directory is refused by name before
// anything is read from it (/dev/zero would never end, a FIFO without a
// writer would block); a symlink to a regular file is followed, as a
// mounted ConfigMap's keys are.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	limit := filepath.Join(dir, "limit.yaml")
	over := filepath.Join(dir, "over.yaml")
	fifo := filepath.Join(dir, "fifo.yaml")
	sock := filepath.Join(dir, "sock.yaml")
	link := filepath.Join(dir, "link.yaml")
	full := bytes.Repeat([]byte("#"), MaxBytes)
	for name, content := range map[string][]byte{limit: full, over: append(full, '\n')} {
		if err := os.WriteFile(name, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Symlink("limit.yaml", link); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{limit, link} {
		got, err := ReadFile(name)
		if err != nil || !bytes.Equal(got, full) {
			t.Errorf("ReadFile(%s): %d bytes, %v; want the whole %d bytes", name, len(got), err, len(full))
		}
	}
	for name, want := range map[string]string{
		over:        "read " + over + ": larger than 8 MiB",
		fifo:        "read " + fifo + ": is a named pipe (FIFO), not a regular file",
		sock:        "read " + sock + ": is a socket, not a regular file",
		"/dev/zero": "read /dev/zero: is a character device, not a regular file",
		dir:         "read " + dir + ": is a directory, not a regular file",
	} {
		got, err := ReadFile(name)
		if err == nil || err.Error() != want || got != nil {
			t.Errorf("ReadFile(%s): %d bytes, %v; want the error %q", name, len(got), err, want)
		}
	}
	if _, err := ReadFile(over); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile(%s): %v is not ErrTooLarge", over, err)
	}

	// OpenFile, for readers that stream, refuses the same files.
	f, err := OpenFile(link)
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", link, err)
	}
	f.Close()
	if f, err := OpenFile(fifo); err == nil || err.Error() != "read "+fifo+": is a named pipe (FIFO), not a regular file" {
		t.Errorf("OpenFile(%s): %v, %v", fifo, f, err)
	}
}
