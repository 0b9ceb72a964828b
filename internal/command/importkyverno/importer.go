// Package importkyverno is the import kyverno command: Kyverno policies converted into
// SandboxPolicy documents, every part left out reported.
package importkyverno

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-webhook/sandbox-webhook/internal/command"
	"github.com/sandbox-webhook/sandbox-webhook/internal/kyvernoimport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/internal/yamldoc"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// NewCommand returns the import command and its kyverno subcommand.
func NewCommand(streams command.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Convert policies of another mutator into SandboxPolicies",
	}
	cmd.AddCommand(newKyvernoCommand(streams))
	return cmd
}

func newKyvernoCommand(streams command.IOStreams) *cobra.Command {
	var allowPartial bool
	cmd := &cobra.Command{
		Use:   "kyverno FILE|DIR|-...",
		Short: "Convert Kyverno mutate policies into SandboxPolicy documents",
		Long: `Read Kyverno ClusterPolicy and Policy documents (kyverno.io/v1 and v2beta1) and
write the SandboxPolicy documents that do what their mutate rules do, each
preceded by comments naming the Kyverno policy and rules it came from.

Converted: emptyDir volumes (medium, sizeLimit) and read-only hostPath volumes
mounted in every container ((name): "*", or a foreach over
request.object.spec.containers and .initContainers, or over several container
lists flattened) or in the containers a (name) anchor or a foreach's
preconditions select by name, literal env (value overrides, +(value) adds when
absent), pod-level and container memory limits and requests, in
patchStrategicMerge and patchesJson6902 form; matches by kind (Pod, and the
workloads whose pods Kyverno's auto-generated rules mutate), namespaces with
wildcards, namespaceSelector and selector, excludes by namespace or pod labels,
and preconditions that only check the operation; runtimeClassName,
nodeSelector entries (+() keeps the pod's own) and tolerations; a foreach's
image rewritten by regex_replace_all('^REGISTRY/', '{{element.image}}',
'MIRROR/') of a registry other than Docker Hub. A rule for workloads alone
that patches their pod template converts for their pods (the difference
listed); a rule that repeats another (autogen-) converts once; a rule for the
init containers that puts there what another puts into the app containers
merges with it. Two policies that differ only in the medium of their emptyDirs
become one, with a note on --leak-mitigation.

Everything else is reported rule by rule, with the file, policy, rule, field
path and why, and never converted by a guess: validate and generate rules,
context and JMESPath variables (a PATH prepend among them), other volume
types, CPU, other image rewrites (every registry to one mirror, Docker Hub by
its written prefix, image_normalize), annotations,
container-name conditions Kyverno does not compare as globs, workloads
selected by their labels, Kyverno's CEL MutatingPolicy.

Parts converted with a difference (a memory value Kyverno writes over the
pod's own, say) are listed on lines of their own and do not count against
the conversion.

Exits 0 when every mutate rule converted. Otherwise nothing is
written and it exits 1, unless --allow-partial: then what converted is
written, each part left out is listed, and it exits 5.`,
		Example: `  kubectl-sandbox_webhook import kyverno kyverno/uv-cache.yaml > policies/sandbox.yaml
  kubectl get clusterpolicy sandbox-uv-cache -o yaml | kubectl-sandbox_webhook import kyverno -
  kubectl-sandbox_webhook import kyverno --allow-partial kyverno/`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return command.UsageErrorf("import kyverno needs a file, a directory or - for standard input")
			}
			var docs []kyvernoimport.Document
			for _, arg := range args {
				d, err := read(arg, streams.In)
				if err != nil {
					return err
				}
				docs = append(docs, d...)
			}
			res := kyvernoimport.Convert(docs)
			return write(streams, res, allowPartial)
		},
	}
	cmd.Flags().BoolVar(&allowPartial, "allow-partial", false,
		"write what converted when some parts did not (each listed), and exit 5")
	return cmd
}

// read returns the documents of a file, of the policy files of a
// directory, or of standard input (-).
func read(arg string, stdin io.Reader) ([]kyvernoimport.Document, error) {
	if arg == "-" {
		raw, err := io.ReadAll(io.LimitReader(stdin, yamldoc.MaxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		if len(raw) > yamldoc.MaxBytes {
			return nil, fmt.Errorf("standard input: %w", yamldoc.ErrTooLarge)
		}
		return kyvernoimport.Split("-", raw)
	}
	files, err := policy.Files(arg)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json file", arg)
	}
	var docs []kyvernoimport.Document
	for _, f := range files {
		raw, err := yamldoc.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d, err := kyvernoimport.Split(f, raw)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

// write prints the converted policies and what was left out, and returns
// the error the exit code follows.
func write(streams command.IOStreams, res kyvernoimport.Result, allowPartial bool) error {
	errOut := textout.NewTextWriter(streams.ErrOut)
	// Each part not converted says where it can live once Kyverno no
	// longer runs the policy.
	for _, f := range res.Refused {
		if f.Policy == "" {
			fmt.Fprintf(errOut, "refused: %s\n", f)
			continue
		}
		fmt.Fprintf(errOut, "refused: %s; after Kyverno 1.20, in %s\n", f, f.Destination())
	}
	for _, f := range res.LeftOut {
		fmt.Fprintf(errOut, "left out: %s; after Kyverno 1.20, in %s\n", f, f.Destination())
	}
	for _, f := range res.Differences {
		fmt.Fprintf(errOut, "converted with a difference: %s\n", f)
	}
	exact := res.Exact()
	if len(res.Policies) == 0 {
		return errors.New("no Kyverno mutate rule converted")
	}
	if !exact && !allowPartial {
		return fmt.Errorf("%d of %d mutate rules converted (%d with a difference), %d parts left out and %d refused; nothing written (--allow-partial writes what converted)",
			res.Converted, res.Rules, res.ConvertedWithDifference, len(res.LeftOut), len(res.Refused))
	}
	for i, c := range res.Policies {
		if i > 0 {
			fmt.Fprintln(streams.Out, "---")
		}
		if _, err := streams.Out.Write(c.YAML()); err != nil {
			return err
		}
	}
	if !exact {
		return &command.ExitCodeError{Code: command.ExitPartial, Err: fmt.Errorf("%d of %d mutate rules converted (%d with a difference); %d parts left out and %d refused, listed above",
			res.Converted, res.Rules, res.ConvertedWithDifference, len(res.LeftOut), len(res.Refused))}
	}
	summary := fmt.Sprintf("%d mutate rules of %d Kyverno policy documents converted into %d SandboxPolicies", res.Rules, countFrom(res), len(res.Policies))
	if res.ConvertedWithDifference > 0 {
		summary += fmt.Sprintf(", %d of the rules with a difference listed above", res.ConvertedWithDifference)
	}
	fmt.Fprintln(errOut, summary)
	return nil
}

func countFrom(res kyvernoimport.Result) int {
	seen := map[string]bool{}
	for _, c := range res.Policies {
		for _, o := range c.From {
			seen[o.Source+"\x00"+o.Policy] = true
		}
	}
	return len(seen)
}
