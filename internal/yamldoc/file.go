package yamldoc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrTooLarge is ReadFile's error (in an *fs.PathError) for a file larger
// than MaxBytes.
var ErrTooLarge = fmt.Errorf("larger than %d MiB", MaxBytes>>20)

// ReadFile reads a regular file whole, refusing one larger than MaxBytes.
// It is how the policy loader and the command line read a file whole
// (policies, test files, expected objects and patches); input.ReadFile
// streams a file opened with OpenFile instead. Symlinks are followed, as a
// mounted ConfigMap's keys need.
func ReadFile(name string) ([]byte, error) {
	f, err := OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The size a file states is not trusted: it can grow while it is read.
	raw, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxBytes {
		return nil, &fs.PathError{Op: "read", Path: name, Err: ErrTooLarge}
	}
	return raw, nil
}

// OpenFile opens a regular file for reading, following symlinks. A device,
// a FIFO, a socket or a directory is refused before it is opened: reading
// /dev/zero never ends, and opening a FIFO without a writer blocks.
func OpenFile(name string) (*os.File, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if err := regular(name, st.Mode()); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	// What was opened may not be what was looked at.
	if st, err = f.Stat(); err == nil {
		err = regular(name, st.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regular returns an error naming what name is unless its mode is that of a
// regular file.
func regular(name string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	kind := "irregular file"
	switch {
	case mode&fs.ModeCharDevice != 0:
		kind = "character device"
	case mode&fs.ModeDevice != 0:
		kind = "device"
	case mode&fs.ModeNamedPipe != 0:
		kind = "named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		kind = "socket"
	case mode.IsDir():
		kind = "directory"
	}
	return &fs.PathError{Op: "read", Path: name, Err: errors.New("is a " + kind + ", not a regular file")}
}
