package dryrun

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport/maprun"
	"github.com/sandbox-webhook/sandbox-webhook/internal/preview"
	"github.com/sandbox-webhook/sandbox-webhook/internal/textout"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// writeMAPComparison backs dry-run --map: it exports the policies as
// export-map does, runs the MutatingAdmissionPolicies on every input pod
// with the apiserver's own MAP code (k8s.io/apiserver, offline), and says
// for each pod whether the result is the webhook's, or shows how it differs.
func writeMAPComparison(w io.Writer, set *policy.Set, opts mutate.Options, pods []*preview.Pod) error {
	exported, gaps, err := mapexport.Export(set, mapexport.Options{LeakMitigation: opts.LeakMitigation, ExcludeNamespaces: opts.ExcludeNamespaces})
	if err != nil {
		return err
	}
	var names []string
	for _, e := range exported {
		names = append(names, e.Policy.Name)
	}
	fmt.Fprintf(w, "MutatingAdmissionPolicies (export-map): %s\n", strings.Join(names, ", "))
	for _, g := range gaps {
		fmt.Fprintf(w, "  gap: %s\n", g)
	}
	compiled, err := maprun.Compile(exported)
	if err != nil {
		return err
	}
	for _, p := range pods {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace.Name, Labels: p.Namespace.Labels}}
		got, err := compiled.Run(context.Background(), p.Input, ns)
		if err != nil {
			fmt.Fprintf(w, "%s: the MAP rejects the pod: %v\n", p.Name, err)
			continue
		}
		webhook, err := comparableYAML(p.Result.Pod, ns.Name)
		if err != nil {
			return err
		}
		viaMAP, err := comparableYAML(got, ns.Name)
		if err != nil {
			return err
		}
		if webhook == viaMAP {
			fmt.Fprintf(w, "%s: the MAP gives the same pod as the webhook\n", p.Name)
			continue
		}
		diff, err := preview.Diff(webhook, viaMAP, "webhook/"+p.Name, "map/"+p.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: the MAP gives a different pod (-webhook +MAP):\n%s", p.Name, diff)
	}
	return nil
}

// comparableYAML returns pod as the apiserver would encode it (quantities in
// canonical form), without status, in namespace ns.
func comparableYAML(pod *corev1.Pod, ns string) (string, error) {
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Status = corev1.PodStatus{}
	p.Namespace = cmp.Or(p.Namespace, ns)
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if b, err = json.Marshal(m); err != nil {
		return "", err
	}
	out, err := textout.YAML(b)
	return string(out), err
}
