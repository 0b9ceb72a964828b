// Package exportmap is the export-map command: it compiles policies to
// MutatingAdmissionPolicies with mapexport and writes them.
package exportmap

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/flags"
	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// enumFlag is a string flag restricted to values, so a bad value is a flag
// parse error (exit code 2 on the sandbox-webhook command line).
type enumFlag struct {
	value  string
	values []string
}

func (f *enumFlag) String() string { return f.value }
func (f *enumFlag) Type() string   { return "string" }
func (f *enumFlag) Set(s string) error {
	if slices.Contains(f.values, s) {
		f.value = s
		return nil
	}
	return fmt.Errorf("must be one of %s, not %q", strings.Join(f.values, ", "), s)
}

// ErrGaps is returned (wrapped) when the policies cannot be exported without
// gaps and --allow-gaps was not given.
var ErrGaps = errors.New("the policies cannot be exported to MutatingAdmissionPolicies without gaps")

// NewCommand returns the export-map command.
func NewCommand() *cobra.Command {
	var (
		policies          []string
		excludeNamespaces []string
		allowGaps         bool
		static            bool
		output            = &enumFlag{value: "yaml", values: []string{"yaml", "json"}}
		leakMitigation    = mutate.LeakMitigationPolicy
	)
	cmd := &cobra.Command{
		Use:   "export-map --policy PATH...",
		Short: "Compile policies to native MutatingAdmissionPolicies (Kubernetes 1.36+)",
		Long: `Compile SandboxPolicy files to admissionregistration.k8s.io/v1
MutatingAdmissionPolicies and their bindings, which the apiserver runs in
process: no webhook, no certificates, nothing to keep running. The apiserver
then stores the same pods the webhook gives, field for field, status
annotation included; see docs/map-export.md.

Anything a policy does that CEL cannot express is a gap: the command lists
every gap and exits 1, unless --allow-gaps, which emits the policies without
what they cannot do, the gaps as YAML comments and in the
sandbox-webhook.io/export-gaps annotation.

--leak-mitigation and --exclude-namespace are the serve flags the webhook
would run with; the mode is compiled into the policies.

--static writes them for kube-apiserver's staticManifestsDir (1.37+): loaded
from the control plane's disk, where no API client can delete them.`,
		Example: `  kubectl-sandbox_webhook export-map --policy examples/policies/memory > sandbox-map.yaml
  kubectl apply -f sandbox-map.yaml
  kubectl-sandbox_webhook export-map -p policies/ --leak-mitigation=on --exclude-namespace sandbox-webhook`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(policies) == 0 {
				return cmd.FlagErrorFunc()(cmd, errors.New("--policy is required"))
			}
			set, err := policy.Load(policies...)
			if err != nil {
				return err
			}
			exported, gaps, err := mapexport.Export(set, mapexport.Options{LeakMitigation: leakMitigation, ExcludeNamespaces: excludeNamespaces})
			if err != nil {
				return err
			}
			if len(gaps) > 0 && !allowGaps {
				lines := make([]string, len(gaps))
				for i, g := range gaps {
					lines[i] = "  " + g.String()
				}
				return fmt.Errorf("%w (--allow-gaps emits them without these):\n%s", ErrGaps, strings.Join(lines, "\n"))
			}
			if static {
				exported = mapexport.Static(exported)
			}
			if output.value == "json" {
				return mapexport.WriteJSON(cmd.OutOrStdout(), exported)
			}
			return mapexport.WriteYAML(cmd.OutOrStdout(), exported, gaps, policies)
		},
	}
	f := cmd.Flags()
	flags.Policy(f, &policies, "")
	f.VarP(output, "output", "o", "yaml or json (a v1 List)")
	f.BoolVar(&allowGaps, "allow-gaps", false, "emit policies even when they cannot do everything the webhook does, listing what they do not")
	f.BoolVar(&static, "static", false, "name every object with the .static.k8s.io suffix of kube-apiserver's staticManifestsDir (1.37+)")
	flags.LeakMitigation(f, &leakMitigation, "")
	flags.ExcludeNamespace(f, &excludeNamespaces, "; serve's, such as the webhook's own")
	return cmd
}
