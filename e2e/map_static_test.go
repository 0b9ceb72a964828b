package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/mapexport"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// staticAdmissionConfig loads MutatingAdmissionPolicies and their bindings
// from a directory at kube-apiserver's start (manifest-based admission
// control, KEP-5793; beta and on by default in 1.37).
const staticAdmissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionPolicy
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: MutatingAdmissionPolicyConfiguration
    staticManifestsDir: %q
`

// TestMAPStaticManifests: the export of the example memory policies as
// static manifests (export-map --static) is loaded by a second kube-apiserver from its staticManifestsDir, and every
// corpus pod of the set is stored there exactly as the suite's apiserver
// stores it through the webhook (or rejected for the same reason). No API
// client can delete such a policy, nor create one with its suffix: the
// mutation survives an attempt at both.
func TestMAPStaticManifests(t *testing.T) {
	if suite.target.Minor != "" {
		t.Fatalf("static admission manifests are beta from 1.37: run this test on the newest minor, not %s", suite.target.Minor)
	}
	set := golden.Sets[0]
	exported, _ := exportSet(t, set)
	static := mapexport.Static(exported)

	dir := t.TempDir()
	manifests := filepath.Join(dir, "mutating-policies")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	// The file is what export-map --static prints, as docs/map-export.md
	// tells an operator to write it.
	args := []string{"export-map", "--static"}
	for _, p := range set.Policies {
		args = append(args, "--policy", testkit.Path(p))
	}
	out, err := harness.Run(t.Context(), suite.cli, args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "sandbox-map.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, staticAdmissionConfig, manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	cpLog, err := os.Create(filepath.Join(dir, "controlplane.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer cpLog.Close()
	cp, err := harness.StartTarget(filepath.Join(suite.root, "bin"), harness.Target{AdmissionConfigFile: config}, cpLog)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(cpLog.Name()))
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the second control plane: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := createRuntimeClasses(t.Context(), cs); err != nil {
		t.Fatal(err)
	}

	// The same namespaces on both: twins on the suite's apiserver, served
	// by a webhook instance, and the corpus names on the second one.
	nsLabels := golden.NamespaceLabels(t)
	names := slices.Sorted(maps.Keys(nsLabels))
	scope := "static-" + set.Name
	twin := func(ns string) string { return ns + "-" + scope }
	var whNamespaces []*corev1.Namespace
	for _, ns := range names {
		labels := maps.Clone(nsLabels[ns])
		delete(labels, "kubernetes.io/metadata.name")
		whNamespaces = append(whNamespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: twin(ns), Labels: labels}})
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	policies := map[string][]byte{}
	for _, p := range set.Policies {
		files, err := policyFiles(testkit.Path(p))
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(policies, files)
	}
	newInstance(t, scope, instanceOptions{policies: policies, leakMitigation: set.LeakMitigation, namespaces: whNamespaces})
	t.Cleanup(func() {
		for _, ns := range names {
			if err := suite.cs.CoreV1().Pods(twin(ns)).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Errorf("deleting the pods in %s: %v", twin(ns), err)
			}
		}
	})
	if err := harness.WaitMutating(t.Context(), cs, testkit.SandboxPod("sandboxes", "static-probe", sleeping), true); err != nil {
		t.Fatalf("%v\n%s", err, tail(cpLog.Name()))
	}

	// Neither deleting the static policy nor shadowing its name through
	// the API works: the apiserver does not serve static objects, and
	// refuses their suffix on an API object.
	api := cs.AdmissionregistrationV1()
	for _, e := range static {
		err := api.MutatingAdmissionPolicies().Delete(t.Context(), e.Policy.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("deleting static MutatingAdmissionPolicy %s through the API: err = %v; want NotFound", e.Policy.Name, err)
		}
		err = api.MutatingAdmissionPolicyBindings().Delete(t.Context(), e.Binding.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("deleting static MutatingAdmissionPolicyBinding %s through the API: err = %v; want NotFound", e.Binding.Name, err)
		}
		shadow := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "shadow" + mapexport.StaticSuffix},
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: e.Policy.Name},
		}
		if _, err := api.MutatingAdmissionPolicyBindings().Create(t.Context(), shadow, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("creating a binding named %s through the API: err = %v; want Invalid", shadow.Name, err)
		}
	}

	mutated := 0
	for _, c := range golden.Cases(t) {
		if c.Set.Name != set.Name {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			_, input := golden.Pod(t, c.Input)
			viaWebhook, whErr := createIn(t, input, twin(input.Namespace))
			p := input.DeepCopy()
			viaStatic, staticErr := cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
			if whErr != nil || staticErr != nil {
				if !sameRejection(whErr, staticErr) {
					t.Fatalf("outcomes differ\n  webhook:    %v\n  static MAP: %v", whErr, staticErr)
				}
				return
			}
			_, want := golden.Pod(t, c.Output)
			if harness.Mutated(want) {
				if !harness.Mutated(viaStatic) {
					t.Fatal("the corpus expects a mutation; the static MAP made none")
				}
				mutated++
			}
			if diff := cmp.Diff(comparable(viaWebhook), comparable(viaStatic)); diff != "" {
				t.Errorf("the pod stored with the static MAP differs from the pod stored with the webhook (-webhook +static):\n%s", diff)
			}
		})
	}
	if mutated == 0 {
		t.Fatal("no corpus pod was mutated: the comparison proved nothing")
	}
	t.Logf("%d corpus pods mutated by the static MAP as by the webhook", mutated)
}

// tail returns the last lines of the file at path, for a failure message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}
