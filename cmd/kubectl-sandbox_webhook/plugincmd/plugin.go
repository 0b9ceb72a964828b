package plugincmd

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// PluginBinary is the name kubectl finds the binary by as a plugin:
// kubectl sandbox-webhook ... runs kubectl-sandbox_webhook (kubectl maps a
// dash in a plugin's command name to an underscore in its file name).
const PluginBinary = "kubectl-sandbox_webhook"

// pluginDisplayName returns the command name usage lines should show when
// the binary runs as argv0: "kubectl sandbox-webhook" for the plugin, ""
// otherwise.
func pluginDisplayName(argv0 string) string {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	if base == PluginBinary {
		return "kubectl sandbox-webhook"
	}
	return ""
}

// setPluginName makes usage, help and examples say "kubectl sandbox-webhook"
// when the binary runs as a kubectl plugin (argv0 is os.Args[0]).
func setPluginName(root *cobra.Command, argv0 string) {
	name := pluginDisplayName(argv0)
	if name == "" {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = name
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Example = strings.ReplaceAll(c.Example, PluginBinary+" ", name+" ")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
