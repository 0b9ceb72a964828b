package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// podLevelDropped reports whether the apiserver under test drops pod-level
// resources: before 1.34 (the gate is alpha, off) or with
// PodLevelResources=false.
func podLevelDropped(version string, target harness.Target) (bool, error) {
	v, err := utilversion.ParseGeneric(version)
	if err != nil {
		return false, err
	}
	gates := "," + target.FeatureGates
	switch {
	case strings.Contains(gates, ",PodLevelResources=false"):
		return true, nil
	case strings.Contains(gates, ",PodLevelResources=true"):
		return false, nil
	}
	return v.Minor() < 34, nil
}

// imageVolumes reports whether the apiserver under test keeps image
// volumes: from 1.35, where the ImageVolume gate is on by default, unless
// ImageVolume=false. Earlier minors drop an image volume and its mounts
// without an error.
func imageVolumes(version string, target harness.Target) bool {
	gates := "," + target.FeatureGates
	switch {
	case strings.Contains(gates, ",ImageVolume=false"):
		return false
	case strings.Contains(gates, ",ImageVolume=true"):
		return true
	}
	v, err := utilversion.ParseGeneric(version)
	return err == nil && v.Minor() >= 35
}

// Both memory levels, and auto, on the apiserver under test (every minor of
// the version matrix runs this). Each pod is created through the webhook and
// compared in full with dry-run --kube-version's prediction as this
// apiserver stores it (server-side dry run, no webhook). Where the apiserver
// keeps pod-level resources, pod and auto set spec.resources; where it drops
// them (before 1.34, or the gate off), auto gives the containers limits and
// pod stores no headroom, but the client sees a warning, the status
// annotation lists memory/pod as skipped, and /status, /readyz?verbose and
// sandbox_webhook_pod_level_dropped_total say so.
func TestMemoryLevels(t *testing.T) {
	const ns = "memory-levels"
	policies := map[string][]byte{}
	all, err := harness.ReadDir(filepath.Join(suite.root, "e2e/testdata/policies"))
	if err != nil {
		t.Fatal(err)
	}
	levels := []string{"pod", "auto", "container"}
	var files []string
	for _, l := range append([]string{"env"}, levels...) {
		name := "memory-level-" + l + ".yaml"
		policies[name] = all[name]
		files = append(files, filepath.Join(suite.root, "e2e/testdata/policies", name))
	}
	in := newInstance(t, "memory-levels", instanceOptions{
		policies:   policies,
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})
	ensureNamespace(t, ns+referenceSuffix, nil)

	warned, cs := warningClient(t)
	dropped := suite.podLevelDropped
	headroom := resource.MustParse("8Gi")

	for _, level := range levels {
		t.Run(level, func(t *testing.T) {
			pod := testkit.SandboxPod(ns, "level-"+level, sleeping)
			pod.Labels["memory-level"] = level
			predicted, cliWarnings := predict(t, pod, files...)

			warned.take()
			stored, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating the pod: %v", err)
			}
			got := ourWarnings(warned.take())
			if !slices.Equal(sorted(cliWarnings), sorted(got)) {
				t.Errorf("warnings differ\n  dry-run: %q\n  cluster: %q", cliWarnings, got)
			}
			predicted.Namespace += referenceSuffix
			reference, err := cs.CoreV1().Pods(predicted.Namespace).Create(t.Context(), predicted, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("the apiserver rejects the pod dry-run predicts: %v", err)
			}
			if diff := cmp.Diff(comparable(reference), comparable(stored)); diff != "" {
				t.Errorf("the stored pod differs from the dry-run prediction (-predicted +stored):\n%s", diff)
			}

			podLevel := level == "pod" || (level == "auto" && !dropped)
			lim, hasPodLimit := podLimit(stored)
			ctrLim, hasCtrLimit := stored.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
			warnedDrop := slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "drops pod-level resources") })
			annotation := stored.Annotations["sandbox-webhook.io/status"]
			switch {
			case podLevel && !dropped:
				if !hasPodLimit || lim.Cmp(headroom) != 0 || hasCtrLimit {
					t.Errorf("pod-level limit %v (%v), container limit %v (%v); want the pod-level 8Gi headroom only", &lim, hasPodLimit, &ctrLim, hasCtrLimit)
				}
			case podLevel && dropped:
				if hasPodLimit || hasCtrLimit || stored.Spec.Resources != nil {
					t.Errorf("stored resources %+v, container limit %v; want none: this apiserver drops pod-level resources", stored.Spec.Resources, &ctrLim)
				}
				if !warnedDrop {
					t.Errorf("the client saw warnings %q; want one saying the apiserver drops pod-level resources", got)
				}
				if !strings.Contains(annotation, `"skipped":["memory/pod: this apiserver drops pod-level resources`) {
					t.Errorf("status annotation %s; want memory/pod skipped", annotation)
				}
			default: // container, or auto where pod-level resources are dropped
				if hasPodLimit || stored.Spec.Resources != nil || !hasCtrLimit || ctrLim.Cmp(headroom) != 0 {
					t.Errorf("pod-level resources %+v, container limit %v (%v); want the 8Gi headroom on the container", stored.Spec.Resources, &ctrLim, hasCtrLimit)
				}
			}
			if !podLevel && warnedDrop {
				t.Errorf("level %s warned %q", level, got)
			}
		})
	}

	// What the server shows about the cluster.
	cluster := in.clusterStatus(t)
	want := "kept"
	var wantAffected []string
	if dropped {
		want, wantAffected = "dropped", []string{"memory-level-pod"}
	}
	if cluster.Version != suite.version || cluster.PodLevelResources != want || cluster.From != "metrics" || !slices.Equal(cluster.Affected, wantAffected) {
		t.Errorf("/status cluster %+v; want version %s, podLevelResources %s from metrics, affected %q", cluster, suite.version, want, wantAffected)
	}
	wantCount := 0.0
	if dropped {
		wantCount = 1
	}
	in.checkDropSignals(t, "pod-level-resources", "memory-level-pod", "sandbox_webhook_pod_level_dropped_total", dropped, wantCount)
}

// clusterStatus is the cluster section of the server's /status, as
// docs/serve.md documents it.
type clusterStatus struct {
	Version             string   `json:"version"`
	PodLevelResources   string   `json:"podLevelResources"`
	ImageVolumes        string   `json:"imageVolumes"`
	From                string   `json:"from"`
	Affected            []string `json:"affectedPolicies"`
	ImageVolumeAffected []string `json:"imageVolumeAffectedPolicies"`
}

// clusterStatus reads what the server found out about the apiserver.
func (in *instance) clusterStatus(t *testing.T) clusterStatus {
	t.Helper()
	text, err := in.webhook.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Cluster clusterStatus `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		t.Fatalf("/status: %v\n%s", err, text)
	}
	return st.Cluster
}

// checkDropSignals checks what the server shows about a feature the
// apiserver drops (when dropped) and policy asks for: a /readyz?verbose
// line [!]notice naming the policy, and metric{policy} at count.
func (in *instance) checkDropSignals(t *testing.T, notice, policy, metric string, dropped bool, count float64) {
	t.Helper()
	code, verbose, err := in.webhook.ReadyzVerbose(t.Context())
	if err != nil || code != http.StatusOK {
		t.Fatalf("/readyz?verbose: %d %v\n%s", code, err, verbose)
	}
	if has := strings.Contains(verbose, "[!]"+notice); has != dropped || (dropped && !strings.Contains(verbose, policy)) {
		t.Errorf("/readyz?verbose:\n%s\nwant a %s notice naming %s: %v", verbose, notice, policy, dropped)
	}
	// The series appears once counted: none is the count 0.
	switch n, err := testkit.Metric(in.metrics(t), metric, "policy="+policy); {
	case count == 0 && errors.Is(err, testkit.ErrNoSeries):
	case err != nil:
		t.Errorf("%v, want %v", err, count)
	case n != count:
		t.Errorf("%s{policy=%s} = %v, want %v", metric, policy, n, count)
	}
}

// predict runs dry-run --predict for the apiserver under test on pod and
// returns its predicted pod and warnings.
func predict(t *testing.T, pod *corev1.Pod, policies ...string) (*corev1.Pod, []string) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	in, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pod.yaml")
	if err := os.WriteFile(file, in, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"dry-run", "-f", file, "-o", "yaml", "--predict"}
	for _, p := range policies {
		args = append(args, "--policy", p)
	}
	pod, warnings, _ := dryRunOne(t, args, false)
	return pod, warnings
}
