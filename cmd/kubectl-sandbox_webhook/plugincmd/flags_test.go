package plugincmd

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-webhook/sandbox-webhook/cmd/webhook/webhookcmd"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/command/commandtest"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// sharedLists are the list flags several commands take: each is
// repeatable and splits its values on commas, in every command.
var sharedLists = []string{"policy", "exclude-namespace", "allowed-host-path"}

// roots are the two binaries' command trees, fresh for each call.
var roots = map[string]func() *cobra.Command{
	PluginBinary:    func() *cobra.Command { return NewCommand(command.IOStreams{}) },
	webhookcmd.Name: func() *cobra.Command { return webhookcmd.NewCommand(command.IOStreams{}) },
}

// TestSharedFlagsOneDefinition walks every command of both binaries: wherever a shared flag
// is defined, it has the same type, shorthand and list rule, and its help
// says the rule; --leak-mitigation is a mutate.LeakMitigation, parsed once,
// while the flags are.
func TestSharedFlagsOneDefinition(t *testing.T) {
	seen := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if slices.Contains(sharedLists, f.Name) || f.Name == "leak-mitigation" {
				seen[f.Name] = append(seen[f.Name], c.CommandPath())
				checkSharedFlag(t, c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, root := range roots {
		walk(root())
	}
	for name, want := range map[string][]string{
		"policy":            {"kubectl-sandbox_webhook dry-run", "kubectl-sandbox_webhook check", "sandbox-webhook serve", "kubectl-sandbox_webhook export-map"},
		"exclude-namespace": {"sandbox-webhook serve", "kubectl-sandbox_webhook export-map"},
		"allowed-host-path": {"kubectl-sandbox_webhook dry-run", "kubectl-sandbox_webhook validate", "sandbox-webhook serve"},
		"leak-mitigation":   {"kubectl-sandbox_webhook dry-run", "kubectl-sandbox_webhook check", "sandbox-webhook serve", "kubectl-sandbox_webhook export-map"},
	} {
		slices.Sort(want)
		slices.Sort(seen[name])
		if !slices.Equal(seen[name], want) {
			t.Errorf("--%s is defined by %q, want %q", name, seen[name], want)
		}
	}
}

// checkSharedFlag parses the flag on a fresh command tree.
func checkSharedFlag(t *testing.T, path, name string) {
	t.Helper()
	words := strings.Fields(path)
	cmd, _, err := roots[words[0]]().Find(words[1:])
	if err != nil {
		t.Fatal(err)
	}
	f := cmd.LocalFlags().Lookup(name)
	if name == "leak-mitigation" {
		lm, ok := f.Value.(*mutate.LeakMitigation)
		if !ok {
			t.Errorf("%s --%s is a %T, not a *mutate.LeakMitigation", path, name, f.Value)
			return
		}
		if err := f.Value.Set("maybe"); err == nil {
			t.Errorf("%s --leak-mitigation=maybe is accepted", path)
		}
		if err := f.Value.Set("on"); err != nil || *lm != mutate.LeakMitigationOn {
			t.Errorf("%s --leak-mitigation=on: %q, %v", path, *lm, err)
		}
		return
	}
	sv, ok := f.Value.(pflag.SliceValue)
	if !ok || f.Value.Type() != "stringSlice" {
		t.Errorf("%s --%s is a %s, not a comma-splitting stringSlice", path, name, f.Value.Type())
		return
	}
	if name == "policy" && f.Shorthand != "p" {
		t.Errorf("%s --policy has shorthand %q, want p", path, f.Shorthand)
	}
	if !strings.Contains(f.Usage, "repeatable or comma-separated") {
		t.Errorf("%s --%s: the help does not give the list rule: %s", path, name, f.Usage)
	}
	for _, v := range []string{"a,b", "c"} {
		if err := cmd.LocalFlags().Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	if got := sv.GetSlice(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("%s --%s a,b --%s c gives %q", path, name, name, got)
	}
}

// TestPolicyListsSplitOnCommas: dry-run and export-map take --policy a,b
// (and export-map --exclude-namespace x,y) as serve does: the whole output
// is that of the repeated flag.
func TestPolicyListsSplitOnCommas(t *testing.T) {
	a, b := testkit.Path("testdata/policies/multi/a-uv-cache.yaml"), testkit.Path("testdata/policies/multi/b-extra.yaml")
	pod := testkit.Path("testdata/pods/basic.yaml")
	for name, args := range map[string][2][]string{
		"dry-run": {
			{"dry-run", "-f", pod, "-o", "patch", "--policy", a, "--policy", b},
			{"dry-run", "-f", pod, "-o", "patch", "--policy", a + "," + b},
		},
		"export-map": {
			{"export-map", "--allow-gaps", "--policy", a, "-p", b, "--exclude-namespace", "x", "--exclude-namespace", "y"},
			{"export-map", "--allow-gaps", "--policy", a + "," + b, "--exclude-namespace", "x,y"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			repeated, repeatedErr, code := commandtest.RunCLI(t, Main, "", args[0]...)
			if code != command.ExitOK {
				t.Fatalf("%q: exit code %d:\n%s", args[0], code, repeatedErr)
			}
			if !strings.Contains(repeated+repeatedErr, "a-uv-cache") || !strings.Contains(repeated+repeatedErr, "b-extra") {
				t.Fatalf("%q does not use both policies:\n%s%s", args[0], repeated, repeatedErr)
			}
			commas, commasErr, code := commandtest.RunCLI(t, Main, "", args[1]...)
			if code != command.ExitOK || commas != repeated || commasErr != repeatedErr {
				t.Errorf("%q (exit code %d):\n%s--- stderr\n%s\nwant, as %q:\n%s--- stderr\n%s",
					args[1], code, commas, commasErr, args[0], repeated, repeatedErr)
			}
		})
	}
}
