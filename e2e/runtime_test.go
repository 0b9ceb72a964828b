package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
)

// createRuntimeClasses creates the RuntimeClasses the corpus pods name: the
// API server's RuntimeClass plugin refuses a pod that names a missing one.
func createRuntimeClasses(ctx context.Context, cs kubernetes.Interface) error {
	b, err := os.ReadFile(testkit.Path(golden.RuntimeClasses))
	if err != nil {
		return err
	}
	var list struct {
		Items []nodev1.RuntimeClass `json:"items"`
	}
	if err := yaml.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("%s: %w", golden.RuntimeClasses, err)
	}
	for i := range list.Items {
		if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &list.Items[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("runtime class %s: %w", list.Items[i].Name, err)
		}
	}
	return nil
}

// TestRuntimeClassPlugin: a runtime class the webhook sets still gets what
// its RuntimeClass adds. The API server's RuntimeClass plugin runs before
// the webhooks, but again after a webhook changes the pod (admission
// reinvocation), so the stored pod has the class's overhead and its
// scheduling (nodeSelector and tolerations) beside the policy's own. With
// a pod that names another class and onConflict: override, the class is
// replaced and the client warned; with a class that does not exist, the
// API server refuses the pod, as it would one that named it.
func TestRuntimeClassPlugin(t *testing.T) {
	const ns = "runtime-placement"
	ctx := t.Context()
	overhead := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("50m")}
	rc := &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor-pool"},
		Handler:    "runsc",
		Overhead:   &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"sandbox.example.com/runtime": "gvisor"},
			Tolerations:  []corev1.Toleration{{Key: "sandbox.example.com/runtime", Operator: corev1.TolerationOpEqual, Value: "gvisor", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if _, err := suite.cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	policy := func(class string) []byte {
		return fmt.Appendf(nil, `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: placement}
spec:
  match: {namespaces: [%s, runtime-probe]}
  runtime:
    className: %s
    tolerations: [{key: pool.example.com/sandboxes, operator: Exists, effect: NoSchedule}]
    nodeSelector: {pool.example.com/name: sandboxes}
    onConflict: override
`, ns, class)
	}
	newInstance(t, "runtime", instanceOptions{
		policies:   map[string][]byte{"placement.yaml": policy(rc.Name)},
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
	})

	warned, cs := warningClient(t)
	for _, own := range []string{"", "runc"} {
		t.Run("own class "+cmp.Or(own, "none"), func(t *testing.T) {
			pod := testkit.SandboxPod(ns, "placed-"+cmp.Or(own, "none"), sleeping)
			if own != "" {
				pod.Spec.RuntimeClassName = &own
			}
			warned.take()
			got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.RuntimeClassName == nil || *got.Spec.RuntimeClassName != rc.Name {
				t.Errorf("runtimeClassName %v, want %s", got.Spec.RuntimeClassName, rc.Name)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Overhead, overhead) {
				t.Errorf("overhead %v, want the RuntimeClass's %v", got.Spec.Overhead, overhead)
			}
			wantSelector := map[string]string{"sandbox.example.com/runtime": "gvisor", "pool.example.com/name": "sandboxes"}
			if !equality.Semantic.DeepEqual(got.Spec.NodeSelector, wantSelector) {
				t.Errorf("nodeSelector %v, want the policy's and the RuntimeClass's %v", got.Spec.NodeSelector, wantSelector)
			}
			for _, want := range []corev1.Toleration{rc.Scheduling.Tolerations[0], {Key: "pool.example.com/sandboxes", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}} {
				if !slices.ContainsFunc(got.Spec.Tolerations, func(o corev1.Toleration) bool { return equality.Semantic.DeepEqual(o, want) }) {
					t.Errorf("tolerations %v lack %v", got.Spec.Tolerations, want)
				}
			}
			texts := warned.take()
			replaced := slices.ContainsFunc(texts, func(w string) bool {
				return w == `sandbox-webhook: policy "placement": runtimeClass/gvisor-pool: the pod's own runtimeClassName "runc" is replaced (onConflict: override)`
			})
			if replaced != (own != "") {
				t.Errorf("warnings %q: the replacement warned %v, want %v", texts, replaced, own != "")
			}
		})
	}

	t.Run("missing class", func(t *testing.T) {
		const missing = "no-such-runtime"
		newInstance(t, "runtime-missing", instanceOptions{
			policies:   map[string][]byte{"placement.yaml": policy(missing)},
			namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
			noProbe:    true, // its probe pods would be refused too
		})
		// The namespace's label moves to the new instance before its
		// configuration reaches the API server: until it does, no webhook
		// selects the namespace and a pod is created without a class.
		testkit.WaitFor(t, "the API server's refusal of a pod placed on a missing RuntimeClass", time.Minute, func() error {
			pod := testkit.SandboxPod(ns, "", sleeping)
			pod.GenerateName = "placed-missing-"
			created, err := suite.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err == nil {
				return fmt.Errorf("created on runtime class %q", ptr.Deref(created.Spec.RuntimeClassName, ""))
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), missing) {
				return err
			}
			return nil
		})
	})
}

// TestEphemeralContainerMirror: with webhook.mirrorEphemeralContainers, an
// ephemeral container that kubectl debug adds to a sandbox pod without a
// hostPath volume gets its image from the policy's mirror, as the pod's own
// containers did at CREATE; one a rule does not hold is stored as sent, and
// a container already stored is never rewritten.
func TestEphemeralContainerMirror(t *testing.T) {
	const ns = "ephemeral-mirror"
	newInstance(t, "ephemeral-mirror", instanceOptions{
		policies: map[string][]byte{"mirror.yaml": []byte(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: mirror}
spec:
  match: {podSelector: {matchLabels: {app: sandbox}}}
  imageMirrors: [{from: docker.io, to: mirror.example.com/hub}]
`)},
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		values:     map[string]any{"webhook": map[string]any{"mirrorEphemeralContainers": true}},
	})
	pods := suite.cs.CoreV1().Pods(ns)
	pod := createPod(t, testkit.SandboxPod(ns, "debugged", testkit.Image("busybox:1.36", "sleep", "infinity")))
	if got := pod.Spec.Containers[0].Image; got != "mirror.example.com/hub/library/busybox:1.36" {
		t.Fatalf("the pod's container image at CREATE: %s", got)
	}
	for _, tc := range []struct{ name, image, want string }{
		{"debugger", "busybox:1.36", "mirror.example.com/hub/library/busybox:1.36"},
		{"agnhost", "registry.k8s.io/e2e-test-images/agnhost:2.53", "registry.k8s.io/e2e-test-images/agnhost:2.53"},
	} {
		cur, err := pods.Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := cur.DeepCopy()
		cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: tc.name, Image: tc.image, TerminationMessagePolicy: corev1.TerminationMessageReadFile},
		})
		got, err := pods.UpdateEphemeralContainers(t.Context(), pod.Name, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("adding ephemeral container %s: %v", tc.name, err)
		}
		var images []string
		for _, c := range got.Spec.EphemeralContainers {
			images = append(images, c.Image)
		}
		var want []string
		for _, c := range before.Spec.EphemeralContainers {
			want = append(want, c.Image)
		}
		if want = append(want, tc.want); !slices.Equal(images, want) {
			t.Errorf("ephemeral container images after adding %s: %q, want %q", tc.name, images, want)
		}
	}
}
