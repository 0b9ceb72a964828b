package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// warnings collects the Warning headers the apiserver returns, as kubectl
// prints them.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

// warningClient is a client of the suite's apiserver whose warnings go to
// the returned collector.
func warningClient(t *testing.T) (*warnings, kubernetes.Interface) {
	t.Helper()
	warned := &warnings{}
	cfg := *suite.cp.Config
	cfg.WarningHandler = warned
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return warned, cs
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.text
	w.text = nil
	return t
}

// Case 5: Pod Security admission runs after the webhook. In a namespace
// enforcing baseline (no hostPath volumes) the seed policy's asset comes
// from its image source and the pod is admitted; an asset without an image
// source is still injected as a hostPath, and the pod is rejected with our
// warning telling the client why. A privileged namespace gets the hostPath.
// Where the apiserver drops image volumes (before 1.35, or ImageVolume
// off), the image source is not injected: the client sees a warning, the
// status annotation lists the asset as skipped, and /status,
// /readyz?verbose and sandbox_webhook_image_volume_dropped_total say so.
func TestPodSecurity(t *testing.T) {
	policies, err := harness.ReadDir(filepath.Join(suite.root, "examples/policies/memory"))
	if err != nil {
		t.Fatal(err)
	}
	extra, err := harness.ReadDir(filepath.Join(suite.root, "e2e/testdata/policies"))
	if err != nil {
		t.Fatal(err)
	}
	policies["hostpath-only.yaml"] = extra["hostpath-only.yaml"]
	in := newInstance(t, "podsecurity", instanceOptions{
		policies: policies,
		namespaces: []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "podsecurity-baseline", Labels: map[string]string{enforceLabel: "baseline"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "podsecurity-privileged", Labels: map[string]string{enforceLabel: "privileged"}}},
		},
	})

	warned, cs := warningClient(t)

	t.Run("baseline: the asset comes from its image", func(t *testing.T) {
		got, err := cs.CoreV1().Pods("podsecurity-baseline").Create(t.Context(), testkit.SandboxPod("podsecurity-baseline", "image-asset", sleeping), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the apiserver rejected the pod: %v", err)
		}
		p := seedProblems(got, corev1.StorageMediumMemory)
		w := warned.take()
		const item = "asset/rebench-v2:image"
		type statusPolicy struct {
			Name     string   `json:"name"`
			Injected []string `json:"injected"`
			Skipped  []string `json:"skipped"`
		}
		var st struct {
			Policies []statusPolicy `json:"policies"`
		}
		if err := json.Unmarshal([]byte(got.Annotations[mutate.StatusAnnotation]), &st); err != nil {
			t.Fatal(err)
		}
		var seed statusPolicy
		for _, sp := range st.Policies {
			if sp.Name == "sandbox-seed" {
				seed = sp
			}
		}
		if !imageVolumes(suite.version, suite.target) {
			// Before 1.35 the ImageVolume gate is off by default and the
			// apiserver would drop the image volume and its mounts without
			// an error (docs/install.md says so): the webhook injects
			// neither, and says why.
			p = slices.DeleteFunc(p, func(s string) bool {
				return strings.Contains(s, "want one read-only mount at "+assetMountPath+", have []")
			})
			if v := volumeByName(got, "rebench-v2"); v != nil {
				t.Errorf("asset volume %+v stored; this apiserver was expected to drop image volumes", v)
			}
			wantWarning := `sandbox-webhook: policy "sandbox-seed": ` + item + ": " + mutate.ImageVolumeDroppedReason
			if !slices.Contains(w, wantWarning) {
				t.Errorf("the client saw warnings %q; want %q", w, wantWarning)
			}
			if slices.Contains(seed.Injected, item) || !slices.Contains(seed.Skipped, item+": "+mutate.ImageVolumeDroppedReason) {
				t.Errorf("status of sandbox-seed %+v; want %s skipped: %s", seed, item, mutate.ImageVolumeDroppedReason)
			}
		} else {
			if v := volumeAt(got, got.Spec.Containers[0], assetMountPath); v == nil || v.Image == nil || v.HostPath != nil {
				t.Errorf("asset volume %+v, want an image volume and no hostPath", v)
			}
			if !slices.Contains(seed.Injected, item) || slices.ContainsFunc(seed.Skipped, func(s string) bool { return strings.HasPrefix(s, item+":") }) {
				t.Errorf("status of sandbox-seed %+v; want %s injected, not skipped", seed, item)
			}
			for _, text := range w {
				if strings.Contains(text, "image volumes") {
					t.Errorf("the client saw warning %q on an apiserver that keeps image volumes", text)
				}
			}
		}
		if len(p) > 0 {
			t.Errorf("stored pod:%s", joinProblems(p))
		}
	})

	t.Run("baseline: the apiserver stores the pod it stored before, apart from the status", func(t *testing.T) {
		// What the webhook did before the apiserver's image-volume support
		// was known (mutate's default), stored without the webhook in a
		// twin namespace, against what it does now, stored through it: the
		// same pod, whether or not this apiserver drops image volumes. The
		// pod mounts the asset itself, leaving the volume to the webhook:
		// the apiserver dropped that mount with the injected image volume.
		const twin = "podsecurity-baseline" + referenceSuffix
		ensureNamespace(t, twin, map[string]string{enforceLabel: "baseline"})
		pod := testkit.SandboxPod("podsecurity-baseline", "mounts-asset", sleeping)
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "rebench-v2", MountPath: assetMountPath, ReadOnly: true})
		before := mutate.Pod(pod.DeepCopy(), mutate.Namespace{Name: pod.Namespace, Labels: map[string]string{enforceLabel: "baseline"}},
			golden.Policies(t, "examples/policies/memory"), mutate.Options{}).Pod.DeepCopy()
		before.Namespace = twin
		reference, err := cs.CoreV1().Pods(twin).Create(t.Context(), before, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("the apiserver rejects the pod as mutated before: %v", err)
		}
		stored, err := cs.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the apiserver rejected the pod: %v", err)
		}
		warned.take()
		a, b := comparable(stored), comparable(reference)
		for _, m := range []map[string]any{a, b} {
			delete(m["metadata"].(map[string]any)["annotations"].(map[string]any), mutate.StatusAnnotation)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("the stored pod differs from the one stored before (-before +now):\n%s", diff)
		}
	})

	t.Run("baseline: a hostPath-only asset is rejected with our warning", func(t *testing.T) {
		pod := testkit.SandboxPod("podsecurity-baseline", "hostpath-asset", sleeping)
		pod.Labels["assets"] = "hostpath-only"
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
		if err == nil {
			t.Fatal("the apiserver admitted a pod with a hostPath volume in a baseline namespace")
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "baseline`) || !strings.Contains(err.Error(), "hostPath") {
			t.Errorf("rejection %q, want Pod Security's baseline hostPath rejection", err)
		}
		w := warned.take()
		found := false
		for _, text := range w {
			found = found || (strings.Contains(text, "hostPath") && strings.Contains(text, "baseline") && strings.Contains(text, "datasets"))
		}
		if !found {
			t.Errorf("the client saw warnings %q; want one naming the datasets hostPath asset and the baseline level", w)
		}
	})

	t.Run("privileged: the asset is the hostPath", func(t *testing.T) {
		got, err := cs.CoreV1().Pods("podsecurity-privileged").Create(t.Context(), testkit.SandboxPod("podsecurity-privileged", "hostpath-asset", sleeping), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the apiserver rejected the pod: %v", err)
		}
		if p := seedProblems(got, corev1.StorageMediumMemory); len(p) > 0 {
			t.Errorf("stored pod:%s", joinProblems(p))
		}
		v := volumeAt(got, got.Spec.Containers[0], assetMountPath)
		if v == nil || v.HostPath == nil || v.Image != nil {
			t.Errorf("asset volume %+v, want the hostPath", v)
		}
	})

	t.Run("the server says which policies lose their image assets", func(t *testing.T) {
		dropped := !imageVolumes(suite.version, suite.target)
		cluster := in.clusterStatus(t)
		want, wantAffected := "kept", []string(nil)
		if dropped {
			want, wantAffected = "dropped", []string{"sandbox-seed"}
		}
		if cluster.ImageVolumes != want || cluster.From != "metrics" || !slices.Equal(cluster.ImageVolumeAffected, wantAffected) {
			t.Errorf("/status cluster %+v; want imageVolumes %s from metrics, affected %q", cluster, want, wantAffected)
		}
		wantCount := 0.0
		if dropped {
			// The three baseline pods (sandbox-seed matches the
			// hostPath-only one too); the privileged one got the hostPath.
			wantCount = 3
		}
		in.checkDropSignals(t, "image-volumes", "sandbox-seed", "sandbox_webhook_image_volume_dropped_total", dropped, wantCount)
	})
}
