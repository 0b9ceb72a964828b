package cli

import "github.com/spf13/cobra"

// extraCommands are the commands other packages provide.
func extraCommands() []*cobra.Command {
	return nil
}
