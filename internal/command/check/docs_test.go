package check

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsReferencesExist: every docs/FILE.md#anchor this package's
// messages point to is a heading of that file (GitHub's anchor of it).
func TestDocsReferencesExist(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`docs/([a-z-]+\.md)#([a-z0-9-]+)`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(src), -1) {
			found++
			doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", m[1]))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if !hasAnchor(string(doc), m[2]) {
				t.Errorf("%s points to docs/%s#%s, which has no such heading", f, m[1], m[2])
			}
		}
	}
	if found == 0 {
		t.Fatal("no docs reference found: the pattern no longer matches the messages")
	}
}

// hasAnchor reports whether markdown has a heading whose GitHub anchor is
// anchor: lower case, spaces to hyphens, punctuation dropped.
func hasAnchor(markdown, anchor string) bool {
	for line := range strings.Lines(markdown) {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
