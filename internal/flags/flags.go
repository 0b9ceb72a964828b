// Package flags defines, once, the flags that several sandbox-webhook
// commands take (serve, dry-run, validate, export-map, check): each has one
// name, one type, one parse and one rule for lists wherever it appears.
//
// A list flag is repeatable and splits each value on commas, as serve's
// environment variables and config file always did: --policy a.yaml,b/
// --policy c.yaml names three paths. A path holding a comma is quoted:
// --policy '"x,y.yaml"'.
package flags

import (
	"github.com/spf13/pflag"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// listRule ends the help of every list flag.
const listRule = "repeatable or comma-separated"

// Policy defines --policy (-p), the policy files and directories to load.
// note, when not empty, ends the help ("; reloaded on change").
func Policy(fs *pflag.FlagSet, paths *[]string, note string) {
	fs.StringSliceVarP(paths, "policy", "p", nil,
		"policy file, or directory of *.yaml, *.yml and *.json policy files; "+listRule+note)
}

// AllowEmptyPolicies defines --allow-empty-policies.
func AllowEmptyPolicies(fs *pflag.FlagSet, allow *bool) {
	fs.BoolVar(allow, "allow-empty-policies", false,
		"accept a policy set with no policy (every pod is admitted unchanged); without it an empty file or a directory without policy files is invalid")
}

// AllowedHostPath defines --allowed-host-path: serve, validate and dry-run
// share it, so that an offline check refuses exactly the host paths the
// server refuses (policy.CheckAllowedHostPaths checks the directories,
// policy.AllowHostPaths a set against them).
func AllowedHostPath(fs *pflag.FlagSet, dirs *[]string) {
	fs.StringSliceVar(dirs, "allowed-host-path", nil,
		"directory hostPath assets must lie in (a policy with one outside all is invalid); "+listRule+
			"; default: any path the built-in checks accept")
}

// ExcludeNamespace defines --exclude-namespace, the namespaces whose pods
// are never mutated (kube-system never is). note ends the help.
func ExcludeNamespace(fs *pflag.FlagSet, names *[]string, note string) {
	fs.StringSliceVar(names, "exclude-namespace", nil,
		"namespace whose pods are never mutated (kube-system never is); "+listRule+note)
}

// LeakMitigation defines --leak-mitigation. Its value is lm itself, parsed
// while the flags are: a bad value is a usage error, and the command reads
// the parsed mode. lm's value when called is the default ("" for none, when
// note says what unset means).
func LeakMitigation(fs *pflag.FlagSet, lm *mutate.LeakMitigation, note string) {
	fs.Var(lm, "leak-mitigation",
		"mode override for every policy: on (caches on disk), off (in memory) or policy (each policy's own mode)"+note)
}
