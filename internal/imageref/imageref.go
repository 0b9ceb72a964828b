// Package imageref rewrites image references to mirrors. Images are named as
// the container runtime names them (github.com/distribution/reference, which
// containerd and the kubelet use): busybox is docker.io/library/busybox.
package imageref

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// Rule sends the images under From, a registry or a repository prefix, to
// To.
type Rule struct{ From, To string }

// CheckPrefix says what is wrong with s as a rule's from or to, or "" when
// nothing is: it must be a registry, optionally followed by repository path
// components, written as the runtime names it.
func CheckPrefix(s string) string {
	const allowed = "a registry such as docker.io or mirror.example.com:5000, optionally with a path such as docker.io/library"
	if s == "" {
		return "must be " + allowed
	}
	// Two more components: one would be docker.io/library's.
	named, err := reference.ParseNormalizedNamed(s + "/x/y")
	if err != nil {
		return fmt.Sprintf("must be %s: %v", allowed, err)
	}
	host, _, _ := strings.Cut(s, "/")
	if domain := reference.Domain(named); domain != host {
		return fmt.Sprintf("must start with the registry as the container runtime names it (%s): %s", domain, allowed)
	}
	if named.Name() != s+"/x/y" {
		return fmt.Sprintf("must be written as the container runtime names it: %s", strings.TrimSuffix(named.Name(), "/x/y"))
	}
	return ""
}

// Under reports whether the image names a repository under prefix.
func Under(image, prefix string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	return err == nil && under(named.Name(), prefix)
}

// Mirrored reports whether the image lies under one of the rules' To: a
// mirror's image, read once for every rule.
func Mirrored(image string, rules []Rule) bool {
	named, err := reference.ParseNormalizedNamed(image)
	return err == nil && slices.ContainsFunc(rules, func(r Rule) bool { return under(named.Name(), r.To) })
}

func under(name, prefix string) bool {
	return name == prefix || strings.HasPrefix(name, prefix+"/")
}

// Rewrite returns the image as the first rule whose From it lies under
// rewrites it, tag and digest kept, and that rule's index; -1 when no rule
// applies. It fails for an image the runtime would not pull by name, and
// for a rewrite that is not a valid image name (too long).
func Rewrite(image string, rules []Rule) (string, int, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", -1, fmt.Errorf("not an image name the container runtime reads: %w", err)
	}
	name := named.Name()
	for i, r := range rules {
		if !under(name, r.From) {
			continue
		}
		out := r.To + strings.TrimPrefix(name, r.From)
		if t, ok := named.(reference.Tagged); ok {
			out += ":" + t.Tag()
		}
		if d, ok := named.(reference.Digested); ok {
			out += "@" + d.Digest().String()
		}
		if _, err := reference.ParseNormalizedNamed(out); err != nil {
			return "", -1, fmt.Errorf("mirrored to %s it is not a valid image name: %w", r.To, err)
		}
		return out, i, nil
	}
	return image, -1, nil
}
