package mutate_test

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit/golden"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

type corpusRun struct {
	set  *policy.Set
	ns   mutate.Namespace
	opts mutate.Options
}

func setup(t *testing.T, c golden.Case, pod *corev1.Pod) corpusRun {
	t.Helper()
	set := golden.Policies(t, c.Set.Policies...)
	lm, ok := mutate.ParseLeakMitigation(c.Set.LeakMitigation)
	if !ok {
		t.Fatalf("bad leak-mitigation %q", c.Set.LeakMitigation)
	}
	nsName := pod.Namespace
	if nsName == "" {
		nsName = "default"
	}
	return corpusRun{
		set:  set,
		ns:   mutate.Namespace{Name: nsName, Labels: golden.NamespaceLabels(t)[nsName]},
		opts: mutate.Options{LeakMitigation: lm},
	}
}

// TestGoldenCorpus checks the core against the golden corpus (the same files
// the CLI test compares byte for byte), and for every case that the core is
// pure, idempotent and convergent.
func TestGoldenCorpus(t *testing.T) {
	for _, c := range golden.Cases(t) {
		t.Run(c.Set.Name+"/"+c.Name, func(t *testing.T) {
			_, pod := golden.Pod(t, c.Input)
			_, pristine := golden.Pod(t, c.Input)
			_, want := golden.Pod(t, c.Output)
			r := setup(t, c, pod)

			res := mutate.Pod(pod, r.ns, r.set, r.opts)
			if !apiequality.Semantic.DeepEqual(res.Pod, want) {
				t.Fatalf("mutated pod differs from %s (-want +got):\n%s", c.Output, cmp.Diff(want, res.Pod))
			}
			if !apiequality.Semantic.DeepEqual(pod, pristine) {
				t.Errorf("Pod modified its input (-before +after):\n%s", cmp.Diff(pristine, pod))
			}
			if changed := !apiequality.Semantic.DeepEqual(pristine, res.Pod); changed != res.Changed {
				t.Errorf("Changed = %v, but the pod did change: %v", res.Changed, changed)
			}
			if !res.Changed && res.Pod != pod {
				t.Errorf("an unchanged result must return the input pointer")
			}

			t.Run("idempotent", func(t *testing.T) {
				again := mutate.Pod(res.Pod, r.ns, r.set, r.opts)
				if again.Changed {
					t.Fatalf("second pass changed the pod (-first +second):\n%s", cmp.Diff(res.Pod, again.Pod))
				}
			})

			t.Run("convergent", func(t *testing.T) {
				// Another webhook adds a container after ours; on
				// reinvocation the result must equal a single pass over
				// the pod that had the container from the start.
				late := corev1.Container{
					Name:  "late-sidecar",
					Image: "example.com/late:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceMemory: resource.MustParse("512Mi"),
					}},
				}
				reinvoked := res.Pod.DeepCopy()
				reinvoked.Spec.Containers = append(reinvoked.Spec.Containers, late)
				got := mutate.Pod(reinvoked, r.ns, r.set, r.opts).Pod

				fresh := pristine.DeepCopy()
				fresh.Spec.Containers = append(fresh.Spec.Containers, late)
				wantConv := mutate.Pod(fresh, r.ns, r.set, r.opts).Pod
				// Volume order carries no meaning; a volume that only the
				// late container could mount is appended after the others.
				sortVolumes(got)
				sortVolumes(wantConv)
				if !apiequality.Semantic.DeepEqual(got, wantConv) {
					t.Fatalf("reinvocation did not converge to a single pass (-single +reinvoked):\n%s", cmp.Diff(wantConv, got))
				}
				if again := mutate.Pod(got, r.ns, r.set, r.opts); again.Changed {
					t.Fatalf("pass after reinvocation changed the pod:\n%s", cmp.Diff(got, again.Pod))
				}
			})
		})
	}
}

func sortVolumes(p *corev1.Pod) {
	sort.SliceStable(p.Spec.Volumes, func(i, j int) bool { return p.Spec.Volumes[i].Name < p.Spec.Volumes[j].Name })
}
