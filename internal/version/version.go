// Package version holds the version both binaries print, stamped at build
// time: go build -ldflags "-X github.com/sandbox-webhook/sandbox-webhook/internal/version.Version=v1.2.3".
package version

// Version is the build's version; "dev" when not stamped.
var Version = "dev"
