package testcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// repoRoot is the directory a test file's paths must resolve in, as
// kustomize's default load restriction (LoadRestrictionsRootOnly) keeps a
// kustomization's files under its root. A test file is reviewed in a pull
// request and run in CI; without the root, a path such as ../../.kube/config
// or a committed symlink to a token would be read and printed whole in an
// "object differs" diff.
//
// The paths are checked, then read by the loaders as usual: the check and
// the read are apart, which guards the files of a checkout, not against a
// process changing them while test runs.
type repoRoot struct {
	dir  string // absolute
	why  string // how dir was chosen, for messages
	root *os.Root
}

// openRepoRoot opens the root of the test file at path: the nearest
// directory above it holding .git (a directory, or the file of a worktree or
// a submodule), else the test file's own directory.
func openRepoRoot(path string) (*repoRoot, error) {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	r := &repoRoot{dir: dir, why: "the test file's directory: no directory above it holds .git"}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			r.dir, r.why = d, "the nearest directory above the test file holding .git"
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if r.root, err = os.OpenRoot(r.dir); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *repoRoot) Close() error { return r.root.Close() }

// inside reports whether path resolves inside the root, every symlink on
// the way followed: os.Root refuses a symlink that leads out, and any
// absolute symlink. A path missing in the root, or that the system cannot
// resolve either, is inside: nothing is read from outside, and the loader
// reports it as it would any unreadable path.
func (r *repoRoot) inside(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(r.dir, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return false
	}
	if _, err := r.root.Stat(rel); err == nil || errors.Is(err, fs.ErrNotExist) {
		return true
	}
	_, err = os.Stat(path)
	return err != nil
}

// check returns an error naming every path of t that resolves outside the
// root: each policy and namespaces path, and for a directory each file the
// loader would read in it; each case's input, object and patch. rel makes a
// path of t the path read.
func (r *repoRoot) check(t *policyTest, rel func(string) string) error {
	var outside []string
	// path checks the path p named in field; list, for a field that may
	// name a directory, lists the files in it that the loader reads.
	path := func(field, p string, list func(string) ([]string, error)) {
		if p == "" {
			return
		}
		if !r.inside(rel(p)) {
			outside = append(outside, field+": "+p)
			return
		}
		if st, err := os.Stat(rel(p)); list == nil || err != nil || !st.IsDir() {
			return
		}
		files, err := list(rel(p))
		if err != nil {
			return // the loader reports it, and reads nothing
		}
		for _, f := range files {
			if !r.inside(f) {
				outside = append(outside, field+": "+filepath.Join(p, filepath.Base(f)))
			}
		}
	}
	for i, p := range t.Policies {
		path(fmt.Sprintf("policies[%d]", i), p, policy.Files)
	}
	path("namespaces", t.Namespaces, func(dir string) ([]string, error) { return input.Files([]string{dir}, false) })
	for i, c := range t.Cases {
		for _, f := range []struct{ name, path string }{{"input", c.Input}, {"object", c.Object}, {"patch", c.Patch}} {
			path(fmt.Sprintf("cases[%d] (%s).%s", i, c.Name, f.name), f.path, nil)
		}
	}
	if len(outside) == 0 {
		return nil
	}
	return fmt.Errorf("paths that resolve outside the root %s (%s) are not read; --allow-outside-root reads them:\n  %s",
		r.dir, r.why, strings.Join(outside, "\n  "))
}
