package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// DecodeObjects decodes every YAML or JSON document of b into JSON, expanding
// `kind: List` documents into their items.
func DecodeObjects(b []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		if list.Kind == "List" {
			out = append(out, list.Items...)
			continue
		}
		out = append(out, raw)
	}
}

// LoadPods reads the pods of a YAML file (several documents or a List).
func LoadPods(path string) ([]*corev1.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodePods(b)
}

// DecodePods decodes the pods of YAML or JSON documents; other kinds are an
// error.
func DecodePods(b []byte) ([]*corev1.Pod, error) {
	objs, err := DecodeObjects(b)
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, raw := range objs {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(raw, pod); err != nil {
			return nil, err
		}
		if pod.Kind != "Pod" {
			return nil, fmt.Errorf("want a Pod, got kind %q", pod.Kind)
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// Mutated reports whether pod carries the webhook's status annotation.
func Mutated(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[mutate.StatusAnnotation]
	return ok
}

// WaitMutating polls until the apiserver sends probe's CREATE in its
// namespace to the webhook and stores the result (want true), or no longer
// does (want false), using server-side dry-run creates that store nothing.
// Webhook configuration changes reach the apiserver's admission chain
// asynchronously; this is how a caller knows they have.
func WaitMutating(ctx context.Context, cs kubernetes.Interface, probe *corev1.Pod, want bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last string
	for {
		p := probe.DeepCopy()
		got, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			last = err.Error()
		case Mutated(got) == want:
			return nil
		default:
			last = fmt.Sprintf("mutated=%v", Mutated(got))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for pod creates in %s to be mutated=%v: %s", probe.Namespace, want, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
