package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// referenceSuffix names the twin of each corpus namespace: same labels, but
// no webhook selects it.
const referenceSuffix = "-reference"

// Cases 1 and 2, for every pod of the golden corpus under every policy set:
//
// The cluster agrees with the CLI. `kubectl-sandbox_webhook dry-run --predict`
// predicts the mutated pod and whether the apiserver accepts it. The corpus
// pod is then created through the webhook (stored pod A), and the CLI's
// prediction is created with a server-side dry run in the twin namespace,
// which no webhook selects (pod B): B is what the apiserver makes of exactly
// the predicted pod, its defaulting included (container defaults, the
// pod-level request that defaults to the limit when none is set, and so on).
// A and B must be equal in full, metadata.annotations included, after
// dropping only what the server assigns per object (uid, resourceVersion,
// creationTimestamp, managedFields, the namespace, and a generated name).
// Comparing against the apiserver's own defaulting of the prediction, rather
// than stripping fields we believe are defaulted, means no difference the
// webhook makes can be hidden as "defaulting": a defaulted field equal in A
// and B is only equal because both pods had the same input for it.
//
// The apiserver accepts what the CLI accepts. Every pod --predict accepts is
// stored (in particular container limits above the headroom, request-less
// pods and pods with their own pod-level resources), its stored pod-level
// request was not defaulted to the limit, and a pod-level memory limit the
// pod set is kept; every pod --predict rejects is rejected by Pod Security.
// The client sees exactly the warnings the CLI prints.
func TestCorpus(t *testing.T) {
	nsLabels := golden.NamespaceLabels(t)
	names := slices.Sorted(maps.Keys(nsLabels))
	var namespaces []*corev1.Namespace
	for _, name := range names {
		labels := maps.Clone(nsLabels[name])
		delete(labels, "kubernetes.io/metadata.name")
		namespaces = append(namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		ensureNamespace(t, name+referenceSuffix, labels)
	}

	warned, cs := warningClient(t)

	cases := golden.Cases(t)
	requireCoverage(t, cases)
	for _, set := range golden.Sets {
		t.Run(set.Name, func(t *testing.T) {
			policies := map[string][]byte{}
			for _, p := range set.Policies {
				files, err := policyFiles(testkit.Path(p))
				if err != nil {
					t.Fatal(err)
				}
				maps.Copy(policies, files)
			}
			var objectSelector *metav1.LabelSelector
			if set.AllPods {
				objectSelector = &metav1.LabelSelector{}
			}
			newInstance(t, "corpus-"+set.Name, instanceOptions{
				policies:       policies,
				leakMitigation: set.LeakMitigation,
				namespaces:     namespaces,
				objectSelector: objectSelector,
			})
			t.Cleanup(func() {
				for _, ns := range names {
					err := suite.cs.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
					if err != nil {
						t.Errorf("deleting the corpus pods in %s: %v", ns, err)
					}
				}
			})
			for _, c := range cases {
				if c.Set.Name != set.Name {
					continue
				}
				t.Run(c.Name, func(t *testing.T) { corpusCase(t, cs, warned, c) })
			}
		})
	}
}

// dryRunOne runs dry-run with args, aimed at the apiserver under test, and
// returns the one pod it prints, the warnings it gives and the run. Exit 3
// (--predict predicts a rejection) is accepted when rejected is.
func dryRunOne(t *testing.T, args []string, rejected bool) (*corev1.Pod, []string, harness.Result) {
	t.Helper()
	args = append(args, targetArgs()...)
	r, err := harness.RunCommand(t.Context(), suite.cli, args...)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 && (r.ExitCode != 3 || !rejected) {
		t.Fatalf("sandbox-webhook %s: exit code %d\n%s", strings.Join(args, " "), r.ExitCode, r.Stderr)
	}
	pods, err := harness.DecodePods(r.Stdout)
	if err != nil || len(pods) != 1 {
		t.Fatalf("dry-run printed %d pods (%v), want 1:\n%s", len(pods), err, r.Stdout)
	}
	var warnings []string
	for line := range strings.Lines(string(r.Stderr)) {
		if w, ok := strings.CutPrefix(strings.TrimSpace(line), "Warning: "); ok {
			warnings = append(warnings, w)
		}
	}
	return pods[0], warnings, r
}

func corpusCase(t *testing.T, cs kubernetes.Interface, warned *warnings, c golden.Case) {
	ctx := t.Context()
	args := []string{"dry-run", "-f", testkit.Path(c.Input), "--namespaces", testkit.Path(golden.Namespaces), "-o", "yaml", "--predict"}
	for _, p := range c.Set.Policies {
		args = append(args, "--policy", testkit.Path(p))
	}
	if c.Set.LeakMitigation != "" {
		args = append(args, "--leak-mitigation", c.Set.LeakMitigation)
	}
	want, cliWarnings, r := dryRunOne(t, args, true)

	_, input := golden.Pod(t, c.Input)
	warned.take()
	stored, err := cs.CoreV1().Pods(input.Namespace).Create(ctx, input.DeepCopy(), metav1.CreateOptions{})
	clusterWarnings := ourWarnings(warned.take())
	if !slices.Equal(sorted(cliWarnings), sorted(clusterWarnings)) {
		t.Errorf("warnings differ\n  dry-run: %q\n  cluster: %q", cliWarnings, clusterWarnings)
	}

	if r.ExitCode == 3 {
		// --predict predicted a rejection: Pod Security must reject it, or
		// pod validation, for a mount of a volume the pod does not
		// declare (a hostile mount of a policy's volume, not injected).
		if err == nil {
			t.Fatalf("dry-run --predict predicted a rejection, but the apiserver stored the pod:\n%s", r.Stderr)
		}
		switch {
		case strings.Contains(string(r.Stderr), "which the pod does not declare"):
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), ".name: Not found") {
				t.Errorf("rejected with %v, want the rejection of an undeclared volume dry-run predicted:\n%s", err, r.Stderr)
			}
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity"):
			t.Errorf("rejected with %v, want the Pod Security rejection dry-run predicted:\n%s", err, r.Stderr)
		}
		return
	}
	if err != nil {
		t.Fatalf("the apiserver rejected the mutated pod that dry-run --predict accepts: %v", err)
	}

	// B: the prediction as this apiserver stores it, with no webhook.
	want.Namespace += referenceSuffix
	reference, err := cs.CoreV1().Pods(want.Namespace).Create(ctx, want, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("the apiserver rejects the pod dry-run predicts: %v", err)
	}
	a, b := comparable(stored), comparable(reference)
	if diff := cmp.Diff(b, a); diff != "" {
		t.Errorf("the stored pod differs from the dry-run prediction (-predicted +stored):\n%s", diff)
	}

	// Case 2's specifics, on the pod as stored.
	if lim, ok := podLimit(stored); ok {
		for _, ctr := range allContainers(stored) {
			if cl, ok := ctr.Resources.Limits[corev1.ResourceMemory]; ok && cl.Cmp(lim) > 0 {
				t.Errorf("container %s memory limit %s above the pod-level limit %s", ctr.Name, &cl, &lim)
			}
		}
		if _, own := podRequest(input); !own {
			if p := requestProblems(stored); len(p) > 0 {
				t.Errorf("stored pod:%s", joinProblems(p))
			}
		}
	}
	// 1.37 (PodLevelResourcesFixDefaulting) stores a pod-level CPU limit,
	// the sum of the containers', for a pod whose containers all have one
	// once pod-level resources are set: the webhook's memory headroom sets
	// them. Earlier minors store none. dry-run shows the webhook's output,
	// without the apiserver's defaults, on every minor.
	if c.Name == "all-limits" && c.Set.Name == "memory" {
		cpu, has := resource.Quantity{}, false
		if r := stored.Spec.Resources; r != nil {
			cpu, has = r.Limits[corev1.ResourceCPU]
		}
		v, err := utilversion.ParseGeneric(suite.version)
		if err != nil {
			t.Fatal(err)
		}
		switch want := v.Minor() >= 37 && !suite.podLevelDropped; {
		case want && (!has || cpu.String() != "2500m"):
			t.Errorf("kube-apiserver %s stored pod-level limits.cpu %v (set %v), want 2500m, the containers' sum", suite.version, &cpu, has)
		case !want && has:
			t.Errorf("kube-apiserver %s stored a pod-level limits.cpu %s; only 1.37 on defaults it", suite.version, &cpu)
		}
	}
	if own, ok := podLimit(input); ok {
		lim, kept := podLimit(stored)
		switch {
		case suite.podLevelDropped && kept:
			t.Errorf("this apiserver drops pod-level resources, yet the pod was stored with a pod-level memory limit %s", &lim)
		case !suite.podLevelDropped && lim.Cmp(own) != 0:
			t.Errorf("the pod's own pod-level memory limit %s became %s", &own, &lim)
		}
	}
}

// targetArgs are the dry-run flags that name the apiserver under test, so
// that dry-run predicts what this apiserver stores.
func targetArgs() []string {
	args := []string{"--kube-version", suite.version}
	if suite.target.FeatureGates != "" {
		args = append(args, "--feature-gates", suite.target.FeatureGates)
	}
	return args
}

// requireCoverage fails when the corpus lost a kind of pod case 2 names: a
// container limit above the headroom, no memory request anywhere, and the
// pod's own pod-level resources.
func requireCoverage(t *testing.T, cases []golden.Case) {
	t.Helper()
	var aboveHeadroom, requestless, podLevel bool
	for _, c := range cases {
		_, pod := golden.Pod(t, c.Input)
		if pod.Labels["app"] != "sandbox" {
			continue
		}
		anyRequest := false
		for _, ctr := range allContainers(pod) {
			if l, ok := ctr.Resources.Limits[corev1.ResourceMemory]; ok && l.Cmp(headroom) > 0 {
				aboveHeadroom = true
			}
			_, ok := ctr.Resources.Requests[corev1.ResourceMemory]
			anyRequest = anyRequest || ok
		}
		if _, ok := podRequest(pod); ok {
			anyRequest = true
		}
		requestless = requestless || !anyRequest
		_, ok := podLimit(pod)
		podLevel = podLevel || ok
	}
	if !aboveHeadroom || !requestless || !podLevel {
		t.Fatalf("the corpus lacks a sandbox pod with a container limit above %s (%v), one without memory requests (%v) or one with its own pod-level memory (%v)",
			&headroom, aboveHeadroom, requestless, podLevel)
	}
}

// comparable returns pod as JSON-shaped data without what the server
// assigns per object and without the namespace.
func comparable(pod *corev1.Pod) map[string]any {
	p := pod.DeepCopy()
	p.Namespace = ""
	p.UID, p.ResourceVersion, p.Generation = "", "", 0
	p.CreationTimestamp = metav1.Time{}
	p.ManagedFields = nil
	if p.GenerateName != "" {
		p.Name = ""
	}
	// Tolerations are a set, in the order they were added: the API
	// server's DefaultTolerationSeconds plugin adds its two before the
	// webhook adds a policy's, and after them to the prediction.
	slices.SortStableFunc(p.Spec.Tolerations, func(x, y corev1.Toleration) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return strings.Compare(string(x.Effect), string(y.Effect))
	})
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

func podLimit(pod *corev1.Pod) (q resource.Quantity, ok bool) {
	if pod.Spec.Resources == nil {
		return q, false
	}
	q, ok = pod.Spec.Resources.Limits[corev1.ResourceMemory]
	return q, ok
}

func podRequest(pod *corev1.Pod) (q resource.Quantity, ok bool) {
	if pod.Spec.Resources == nil {
		return q, false
	}
	q, ok = pod.Spec.Resources.Requests[corev1.ResourceMemory]
	return q, ok
}

// ourWarnings keeps the warnings sandbox-webhook sent, dropping the
// apiserver's own.
func ourWarnings(all []string) []string {
	var out []string
	for _, w := range all {
		if strings.HasPrefix(w, "sandbox-webhook") {
			out = append(out, w)
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// policyFiles reads a policy file, or the *.yaml files of a directory, as
// the content of a policies ConfigMap.
func policyFiles(path string) (map[string][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return harness.ReadDir(path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{st.Name(): b}, nil
}
