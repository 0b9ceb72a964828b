package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Volume is a directory laid out the way the kubelet writes a ConfigMap or
// Secret volume: each key is a symlink KEY -> ..data/KEY, and ..data is a
// symlink to a hidden version directory. Update writes a new version and
// swaps ..data in one rename, so a reader sees the old or the new files,
// never a mix; this is the update a mounted ConfigMap gets in a cluster.
type Volume struct {
	// Dir is the mount point.
	Dir string

	mu       sync.Mutex
	versions int
	keys     map[string]bool
}

// NewVolume creates dir holding files (key → content).
func NewVolume(dir string, files map[string][]byte) (*Volume, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	v := &Volume{Dir: dir, keys: map[string]bool{}}
	return v, v.Update(files)
}

// Update replaces the volume's content with files.
func (v *Volume) Update(files map[string][]byte) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	previous := ""
	if v.versions > 0 {
		previous = fmt.Sprintf("..%d_version", v.versions)
	}
	v.versions++
	version := fmt.Sprintf("..%d_version", v.versions)
	if err := os.Mkdir(filepath.Join(v.Dir, version), 0o755); err != nil {
		return err
	}
	for k, b := range files {
		if filepath.Base(k) != k || k[0] == '.' {
			return fmt.Errorf("volume key %q: want a plain file name", k)
		}
		if err := os.WriteFile(filepath.Join(v.Dir, version, k), b, 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(v.Dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(version, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(v.Dir, "..data")); err != nil {
		return err
	}
	// Like the kubelet: link new keys after the swap, unlink gone ones.
	for k := range files {
		if !v.keys[k] {
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(v.Dir, k)); err != nil {
				return err
			}
			v.keys[k] = true
		}
	}
	for k := range v.keys {
		if _, ok := files[k]; !ok {
			if err := os.Remove(filepath.Join(v.Dir, k)); err != nil {
				return err
			}
			delete(v.keys, k)
		}
	}
	// The kubelet removes the previous version last; watchers of the old
	// files see them go.
	if previous != "" {
		return os.RemoveAll(filepath.Join(v.Dir, previous))
	}
	return nil
}

// ReadDir returns the regular *.yaml files of dir (key → content), the
// content a ConfigMap built from that directory would hold.
func ReadDir(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && filepath.Ext(e.Name()) == ".yaml" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		files[n] = b
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml files in %s", dir)
	}
	return files, nil
}
