package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sandbox-webhook/sandbox-webhook/internal/imageref"
	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
)

// Load reads policy files into a Set. Each path is a file or a directory; a
// directory contributes its *.yaml, *.yml and *.json entries in name order
// (not recursively), skipping entries whose name starts with "." and
// following symlinks, so a mounted ConfigMap (x.yaml -> ..data/x.yaml) loads
// as its keys; a dangling symlink (a key being removed) is skipped. A file
// is read only when it is a regular file of at most 8 MiB
// (yamldoc.ReadFile): a device or a FIFO named as a policy is a problem,
// not read. Every problem of every file is collected; the returned error is
// then an *Error.
//
// Nothing to load is a problem too: a directory with no policy file, a file
// with no policy document (an empty or truncated file). An empty set would
// admit every sandbox pod unmutated, in silence; LoadAllowEmpty is for when
// that is intended.
func Load(paths ...string) (*Set, error) {
	return load(false, paths)
}

// LoadAllowEmpty is Load for a set that may hold no policy at all: empty
// files and directories without policy files are accepted.
func LoadAllowEmpty(paths ...string) (*Set, error) {
	return load(true, paths)
}

// emptyHint ends the message about an empty policy file or directory.
const emptyHint = "an empty policy set would leave every pod unmutated"

func load(allowEmpty bool, paths []string) (*Set, error) {
	var (
		policies []*Policy
		problems []Problem
	)
	for _, p := range paths {
		files, err := Files(p)
		if err != nil {
			problems = append(problems, fileProblem(p, err))
			continue
		}
		if len(files) == 0 && !allowEmpty {
			problems = append(problems, Problem{Source: p, Err: documentError(
				"holds no *.yaml, *.yml or *.json file (subdirectories are not read); " + emptyHint)})
		}
		fromDir := len(files) != 1 || files[0] != p
		found, tests := 0, 0 // in p
		for _, f := range files {
			raw, err := yamldoc.ReadFile(f)
			if errors.Is(err, yamldoc.ErrTooLarge) {
				problems = append(problems, Problem{Source: f, Err: documentError(fmt.Sprintf("larger than %d MiB: a policy file is a few KB (and a ConfigMap at most 1 MiB)", yamldoc.MaxBytes>>20))})
				continue
			}
			if err != nil {
				problems = append(problems, fileProblem(f, err))
				continue
			}
			ps, pr, t := parse(f, raw)
			switch {
			case len(ps) > 0 || len(pr) > 0:
			case t > 0 && !fromDir:
				pr = append(pr, Problem{Source: f, Err: documentError("is a policy test (kind " + TestKind + "), not a policy: kubectl-sandbox_webhook test runs it")})
			case t == 0 && !allowEmpty:
				pr = append(pr, Problem{Source: f, Err: documentError("holds no policy document (empty or truncated?); " + emptyHint)})
			}
			found += len(ps) + len(pr)
			tests += t
			policies = append(policies, ps...)
			problems = append(problems, pr...)
		}
		if fromDir && found == 0 && tests > 0 && !allowEmpty {
			problems = append(problems, Problem{Source: p, Err: documentError("holds only policy tests, no policy; " + emptyHint)})
		}
	}
	set, pr := newSet(policies)
	return orProblems(set, append(problems, pr...))
}

// Parse decodes, defaults, validates and compiles the policy documents in raw,
// which may hold several YAML (or JSON) documents separated by "---" lines;
// empty documents are ignored. source names raw in Policy.Source and in
// errors. On any problem Parse returns no policies and an *Error listing all
// of them.
func Parse(source string, raw []byte) ([]*Policy, error) {
	ps, problems, _ := parse(source, raw)
	return orProblems(ps, problems)
}

// ParseSet is Parse followed by NewSet, for tests and for policies that do
// not come from files.
func ParseSet(source string, raw []byte) (*Set, error) {
	ps, problems, _ := parse(source, raw)
	set, pr := newSet(ps)
	return orProblems(set, append(problems, pr...))
}

// NewSet orders compiled policies by name, which is the order they apply
// in, and rejects duplicate names (naming both sources).
func NewSet(policies []*Policy) (*Set, error) {
	return orProblems(newSet(policies))
}

func newSet(policies []*Policy) (*Set, []Problem) {
	sorted := slices.Clone(policies)
	slices.SortStableFunc(sorted, func(a, b *Policy) int { return strings.Compare(a.Name(), b.Name()) })
	var problems []Problem
	h := sha256.New()
	var first *Policy // of the current run of equal names
	for i, p := range sorted {
		if i == 0 || p.Name() != sorted[i-1].Name() {
			first = p
		} else {
			err := duplicateError(field.NewPath("metadata", "name"), p.Name(), "also defined in "+first.Source)
			problems = append(problems, Problem{Source: p.Source, Policy: p.Name(), Err: err})
		}
		fmt.Fprintf(h, "%s %s\n", p.Name(), p.Hash)
	}
	problems = append(problems, chainedMirrors(sorted)...)
	if len(problems) > 0 {
		return nil, problems
	}
	return &Set{Policies: sorted, Hash: hex.EncodeToString(h.Sum(nil))[:hashLen]}, nil
}

// chainedMirrors finds a mirror that another policy's rule would rewrite
// again: each image is then rewritten once whatever the policies' order
// and however often the webhook is called (one policy's own rules are
// checked with it).
func chainedMirrors(policies []*Policy) []Problem {
	var problems []Problem
	for _, p := range policies {
		for i, r := range p.Spec.ImageMirrors {
			for _, q := range policies {
				if q == p {
					continue
				}
				for j, other := range q.Spec.ImageMirrors {
					if imageref.Under(r.To+"/x", other.From) {
						fld := field.NewPath("spec", "imageMirrors").Index(i).Child("to")
						problems = append(problems, Problem{Source: p.Source, Policy: p.Name(), Err: field.Invalid(fld, r.To,
							fmt.Sprintf("lies under policy %q's spec.imageMirrors[%d].from %q, so a mirrored image would be rewritten again: mirror to a registry or path no rule rewrites", q.Name(), j, other.From))})
					}
				}
			}
		}
	}
	return problems
}

// Files lists the files Load reads for one path: the path itself when it is
// a file, else the directory's policy files in name order. The server's
// reloader hashes exactly these to notice a change.
func Files(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !IsPolicyFileName(e.Name()) {
			continue
		}
		f := filepath.Join(path, e.Name())
		info, err := os.Stat(f) // follows symlinks
		if err != nil && e.Type()&fs.ModeSymlink != 0 && errors.Is(err, fs.ErrNotExist) {
			// A key removed from a ConfigMap: its symlink dangles until
			// the kubelet deletes it.
			continue
		}
		if err != nil {
			return nil, err
		}
		if info.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	return files, nil
}

// fileProblem reports a file or directory that cannot be read.
func fileProblem(path string, err error) Problem {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		path, err = pe.Path, pe.Err
	}
	return Problem{Source: path, Err: documentError("cannot read: " + err.Error())}
}

// IsPolicyFileName reports whether a directory entry of this name is read
// as a policy file: *.yaml, *.yml or *.json, not starting with ".".
func IsPolicyFileName(name string) bool {
	return !strings.HasPrefix(name, ".") &&
		slices.Contains([]string{".yaml", ".yml", ".json"}, strings.ToLower(filepath.Ext(name)))
}
