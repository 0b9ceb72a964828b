package preview

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/input"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// TestObjectOfWhatKubectlPrints runs every corpus pod under every policy
// set through Object as `kubectl get -o yaml` prints a stored pod (every
// field the typed encoding writes, members sorted, a creation time and a
// status), which Object mutates without applying the patch: the object
// must be, as a JSON value, what applying the patch to the input gives.
func TestObjectOfWhatKubectlPrints(t *testing.T) {
	taken := 0
	for _, c := range golden.Cases(t) {
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			_, pod := golden.Pod(t, c.Input)
			pod.CreationTimestamp = metav1.Unix(1700000000, 0)
			pod.UID = "0b6f3a8e-4f5c-4d7e-9b1a-2c3d4e5f6a7b"
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}
			enc, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			kubectl := testkit.SortedJSON(t, enc)
			lm, _ := mutate.ParseLeakMitigation(c.Set.LeakMitigation)
			ns := mutate.Namespace{Name: pod.Namespace, Labels: golden.NamespaceLabels(t)[pod.Namespace]}
			if ns.Name == "" {
				ns.Name = "default"
			}
			p, err := Object(input.Classify(kubectl), ns, golden.Policies(t, c.Set.Policies...), mutate.Options{LeakMitigation: lm})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Changed {
				return
			}
			patch, err := jsonpatch.DecodePatch(p.Patch)
			if err != nil {
				t.Fatal(err)
			}
			applied, err := patch.Apply(kubectl)
			if err != nil {
				t.Fatalf("the patch does not apply: %v\n%s", err, p.Patch)
			}
			var want, got any
			if err := json.Unmarshal(applied, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(p.Object, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the object differs from the patch applied (-applied +object):\n%s", diff)
			}
			if enc, err := json.Marshal(p.Result.Pod); err == nil && string(enc) == string(p.Object) {
				taken++
			}
		})
	}
	if taken == 0 {
		t.Error("no pod took the way without applying the patch")
	}
	t.Logf("%d pods mutated without applying the patch", taken)
}
