// Package validate is the validate command: policy files and directories
// loaded as the server loads them, every problem reported.
package validate

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// NewCommand returns the validate command.
func NewCommand(streams command.IOStreams) *cobra.Command {
	var allowed, values []string
	cmd := &cobra.Command{
		Use:   "validate [PATH...] [--values FILE]",
		Short: "Check policy files and directories",
		Long: `Load policy files and directories exactly as the server does and report every
problem with its file, document, field path and what is allowed. Exits 1 when
any policy is invalid. --allowed-host-path refuses hostPath assets outside the
named directories, as serve does with the same flag. --values reads a Helm
values file of the chart and checks its policies.inline files, together, as
the server loads the ConfigMap they become: the chart's schema checks field
names and types, not quantities or the rest of what the server refuses.`,
		Example: `  kubectl-sandbox_webhook validate examples/policies/memory examples/policies/disk/sandbox-seed.yaml
  kubectl-sandbox_webhook validate --allowed-host-path /mnt/shared examples/policies/memory
  kubectl-sandbox_webhook validate --values my-values.yaml`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && len(values) == 0 {
				return command.UsageErrorf("validate needs at least one policy file or directory, or --values")
			}
			if err := policy.CheckAllowedHostPaths(allowed); err != nil {
				return command.UsageErrorf("%v", err)
			}
			// Each argument is its own set: a memory and a disk variant of the
			// same policy may share a name without being loaded together.
			// Every path is checked, and every problem reported at once.
			var problems []error
			out := textout.NewTextWriter(streams.Out) // file names are the user's, not always printable
			report := func(set *policy.Set, err error) {
				if err == nil {
					err = policy.AllowHostPaths(set, allowed)
				}
				if err != nil {
					problems = append(problems, err)
					return
				}
				for _, p := range set.Policies {
					fmt.Fprintf(out, "%s: policy %s (hash %s) is valid\n", p.Source, p.Name(), p.Hash)
				}
			}
			for _, path := range args {
				report(policy.Load(path))
			}
			for _, path := range values {
				report(loadValues(path))
			}
			return errors.Join(problems...)
		},
	}
	flags.AllowedHostPath(cmd.Flags(), &allowed)
	cmd.Flags().StringArrayVar(&values, "values", nil, "a Helm values file of the chart whose policies.inline files to check, together (repeatable)")
	return cmd
}

// loadValues loads the policies.inline files of a Helm values file of the
// chart as one set, as the server loads the ConfigMap they become: each
// entry is a file's text or a SandboxPolicy as a mapping, and a null entry
// (which drops a default) is skipped. Each policy's source names the values
// file and the entry.
func loadValues(path string) (*policy.Set, error) {
	raw, err := yamldoc.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v struct {
		Policies struct {
			Inline map[string]any `json:"inline"`
		} `json:"policies"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(v.Policies.Inline) == 0 {
		return nil, fmt.Errorf("%s: no policies.inline files", path)
	}
	var all []*policy.Policy
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(v.Policies.Inline)) {
		var text []byte
		switch e := v.Policies.Inline[name].(type) {
		case nil:
			continue
		case string:
			text = []byte(e)
		default:
			if text, err = yaml.Marshal(e); err != nil {
				problems = append(problems, fmt.Errorf("%s: policies.inline[%s]: %w", path, name, err))
				continue
			}
		}
		ps, err := policy.Parse(fmt.Sprintf("%s: policies.inline[%s]", path, name), text)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		all = append(all, ps...)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return policy.NewSet(all)
}
