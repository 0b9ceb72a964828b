package app

import (
	"os"
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

// setPluginName makes usage and help say "kubectl sandbox-webhook" when the
// binary runs as a kubectl plugin.
func setPluginName(root *cobra.Command) {
	if name := pluginDisplayName(os.Args[0]); name != "" {
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[cobra.CommandDisplayNameAnnotation] = name
	}
}
