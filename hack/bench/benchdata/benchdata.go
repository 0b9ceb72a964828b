// Package benchdata holds the inputs every sandbox-webhook benchmark shares:
// the pods (a typical sandbox pod of about 5 KB, a large one and one no
// policy selects), the AdmissionReviews the API server would send for them,
// and policy sets of 1, 10 or 100 policies of which only the seed policy
// matches. The core and handler benchmarks (../gobench), the load
// generator and the command line's fleet benchmark read the same inputs,
// so their numbers compare.
package benchdata

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/policy"
)

// Namespace is the namespace of every benchmark pod.
const Namespace = "sandboxes"

// UID is the request uid of every benchmark review.
const UID types.UID = "7f0c1a52-0000-4000-8000-00000000b001"

// SeedPolicies is the policy directory the benchmarks run, relative to the
// repository root: the seed policy, which selects app=sandbox pods.
const SeedPolicies = "examples/policies/memory"

//go:embed typical.yaml
var typicalYAML []byte

// Case is one benchmark pod.
type Case struct {
	// Name is typical, large or non-matching.
	Name string
	// Pod is the pod as the API server encodes it (a typed encoding).
	Pod []byte
}

// Cases returns the benchmark pods: typical, large and non-matching.
func Cases() []Case {
	return []Case{
		{Name: "typical", Pod: encode(TypicalPod())},
		{Name: "large", Pod: encode(LargePod())},
		{Name: "non-matching", Pod: encode(NonMatchingPod())},
	}
}

// TypicalPod is a Harbor-style sandbox pod as the API server sends it at
// CREATE: defaulted, with managedFields, a task container, a native-sidecar
// agent and an init container; about 5 KB of JSON.
func TypicalPod() *corev1.Pod {
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(typicalYAML, pod); err != nil {
		panic(fmt.Sprintf("benchdata: typical.yaml: %v", err)) // embedded, tested
	}
	return pod
}

// LargePod is the typical pod with ten task containers of 48 environment
// variables each (484 in the pod): hundreds of env vars, many containers.
func LargePod() *corev1.Pod {
	pod := TypicalPod()
	pod.Name = "sandbox-large"
	task := pod.Spec.Containers[0]
	pod.Spec.Containers = nil
	for c := range 10 {
		ctr := *task.DeepCopy()
		ctr.Name = fmt.Sprintf("task-%d", c)
		for e := range 39 {
			ctr.Env = append(ctr.Env, corev1.EnvVar{
				Name:  fmt.Sprintf("TASK_SETTING_%02d", e),
				Value: fmt.Sprintf("value-%d-%02d-abcdefghijklmnop", c, e),
			})
		}
		pod.Spec.Containers = append(pod.Spec.Containers, ctr)
	}
	return pod
}

// NonMatchingPod is the typical pod labelled as something else: no policy
// selects it.
func NonMatchingPod() *corev1.Pod {
	pod := TypicalPod()
	pod.Name = "web-7f9c2d41"
	pod.Labels = map[string]string{"app": "web", "app.kubernetes.io/managed-by": "harbor"}
	return pod
}

func encode(pod *corev1.Pod) []byte {
	b, err := json.Marshal(pod)
	if err != nil {
		panic(fmt.Sprintf("benchdata: encoding a pod: %v", err))
	}
	return b
}

// Review returns the admission.k8s.io/v1 AdmissionReview the API server
// posts for the CREATE of pod (its JSON), with uid UID.
func Review(pod []byte) []byte {
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             UID,
			Kind:            metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:        metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			RequestKind:     &metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			RequestResource: &metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace:       Namespace,
			Operation:       admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{
				Username: "system:serviceaccount:harbor:trainer",
				UID:      "5a1c3e0f-0000-4000-8000-0000000000aa",
				Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:harbor", "system:authenticated"},
			},
			Object:  k8sruntime.RawExtension{Raw: pod},
			DryRun:  new(bool),
			Options: k8sruntime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"harbor"}`)},
		},
	})
	if err != nil {
		panic(fmt.Sprintf("benchdata: encoding a review: %v", err))
	}
	return b
}

// OtherPolicies returns n SandboxPolicy documents (YAML) that never select
// a benchmark pod: each matches its own namespaces and pod label. They are
// named other-000 … so that they sort around the seed policy.
func OtherPolicies(n int) []byte {
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata: {name: other-%03d}
spec:
  match:
    namespaces: ["team-%d-*"]
    podSelector: {matchLabels: {app: other-%d}}
  caches: [{name: cache-%d, mountPath: /cache/%d, sizeLimit: 1Gi}]
  env: [{name: OTHER_%d, value: x}]
  memory: {limit: 4Gi}
`, i, i, i, i, i, i))
	}
	return []byte(strings.Join(docs, "---\n"))
}

// PolicySet returns the seed policies plus n-1 others: n policies, one of
// which matches the sandbox pods.
func PolicySet(n int) (*policy.Set, error) {
	seed, err := policy.Load(filepath.Join(Root(), SeedPolicies))
	if err != nil {
		return nil, err
	}
	if n <= 1 {
		return seed, nil
	}
	others, err := policy.ParseSet("others.yaml", OtherPolicies(n-1))
	if err != nil {
		return nil, err
	}
	return policy.NewSet(append(others.Policies, seed.Policies...))
}

// WritePolicies writes the policy files of PolicySet(n) into dir, for a
// server's --policy flag.
func WritePolicies(dir string, n int) error {
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(Root(), SeedPolicies))); err != nil {
		return err
	}
	if n <= 1 {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "zz-others.yaml"), OtherPolicies(n-1), 0o644)
}

// Root returns the repository root (this package's source is three levels
// below it).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
