package policy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckAllowedHostPaths checks the directories given to --allowed-host-path:
// each absolute, clean, not / and not itself a path hostPathRisk refuses.
func CheckAllowedHostPaths(allowed []string) error {
	for _, dir := range allowed {
		if errs := validateAbsPath(field.NewPath("--allowed-host-path"), dir); len(errs) > 0 {
			return fmt.Errorf("--allowed-host-path %q: %s", dir, errs[0].Detail)
		}
		if dir == "/" {
			return fmt.Errorf("--allowed-host-path %q: must not be /; name the directories that hold pre-staged data, such as /mnt/shared", dir)
		}
	}
	return nil
}

// AllowHostPaths returns the problems of set's hostPath assets that lie
// outside every directory of allowed (--allowed-host-path), in the format
// of Load's errors. With no allowed directories every host path the
// built-in checks accept is allowed. The allow-list is the primary control;
// the built-in refusals still apply inside it.
func AllowHostPaths(set *Set, allowed []string) error {
	if len(allowed) == 0 || set == nil {
		return nil
	}
	var problems []Problem
	for _, p := range set.Policies {
		for i, a := range p.Spec.Assets {
			if a.HostPath == nil || under(a.HostPath.Path, allowed) {
				continue
			}
			fld := field.NewPath("spec", "assets").Index(i).Child("hostPath", "path")
			problems = append(problems, Problem{Source: p.Source, Policy: p.Name(),
				Err: field.Invalid(fld, a.HostPath.Path, "must lie under an --allowed-host-path: "+strings.Join(allowed, ", "))})
		}
	}
	return asError(problems)
}

// under reports whether p is or lies under one of dirs.
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool {
		return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
	})
}
