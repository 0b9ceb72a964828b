package image

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SBOM returns an SPDX 2.3 document (JSON) of the Go modules linked into
// binary, as its build information records them: the main module, which
// the document describes, and every dependency, each with its purl. The
// document follows from the binary, its version and created, so a
// reproducible binary has a reproducible SBOM.
func SBOM(binary, version string, created time.Time) ([]byte, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	type ref struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type pkg struct {
		Name             string `json:"name"`
		SPDXID           string `json:"SPDXID"`
		VersionInfo      string `json:"versionInfo"`
		DownloadLocation string `json:"downloadLocation"`
		FilesAnalyzed    bool   `json:"filesAnalyzed"`
		ExternalRefs     []ref  `json:"externalRefs"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	purl := func(path, v string) []ref {
		return []ref{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + v}}
	}
	mainVersion := version
	if mainVersion == "" {
		mainVersion = bi.Main.Version
	}
	pkgs := []pkg{{bi.Main.Path, "SPDXRef-Package-main", mainVersion, "NOASSERTION", false, purl(bi.Main.Path, mainVersion)},
		{"go", "SPDXRef-Package-go", strings.TrimPrefix(bi.GoVersion, "go"), "NOASSERTION", false, purl("stdlib", bi.GoVersion)}}
	rels := []rel{{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Package-main"}, {"SPDXRef-Package-main", "DEPENDS_ON", "SPDXRef-Package-go"}}
	for i, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		id := fmt.Sprintf("SPDXRef-Package-%d", i)
		pkgs = append(pkgs, pkg{d.Path, id, d.Version, "NOASSERTION", false, purl(d.Path, d.Version)})
		rels = append(rels, rel{"SPDXRef-Package-main", "DEPENDS_ON", id})
	}
	return json.MarshalIndent(map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              "sandbox-webhook " + mainVersion,
		"documentNamespace": "https://github.com/sandbox-webhook/sandbox-webhook/spdx/" + bi.Main.Path + "@" + mainVersion + "/" + goos + "-" + goarch,
		"creationInfo": map[string]any{
			"created":  created.UTC().Format(time.RFC3339),
			"creators": []string{"Tool: sandbox-webhook hack/image"},
		},
		"packages":      pkgs,
		"relationships": rels,
	}, "", "  ")
}
