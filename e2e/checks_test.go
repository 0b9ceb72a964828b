package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

// What the example seed policy (examples/policies/*/sandbox-seed.yaml)
// injects.
const (
	uvMountPath    = "/root/.cache/uv"
	uvEnvName      = "UV_LINK_MODE"
	uvEnvValue     = "copy"
	assetMountPath = "/opt/rebench-v2"
)

var (
	uvSizeLimit = resource.MustParse("1Gi")
	headroom    = resource.MustParse("8Gi")
)

// seedProblems lists how a stored pod falls short of what the seed policy
// injects: the status annotation; in every container, init container and
// sidecar exactly one mount at the uv cache path backed by an emptyDir of
// the given medium with a 1Gi size limit, UV_LINK_MODE=copy exactly once and
// the asset mounted read-only; volume names unique; a pod-level memory limit
// of at least the headroom and an explicit pod-level request below it, or,
// on an apiserver that drops pod-level resources (the seed policy is
// memory.level pod, which then injects none and warns), no pod-level
// resources at all.
func seedProblems(pod *corev1.Pod, medium corev1.StorageMedium) []string {
	var p []string
	if _, ok := pod.Annotations[mutate.StatusAnnotation]; !ok {
		p = append(p, "no "+mutate.StatusAnnotation+" annotation")
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		if _, dup := volumes[v.Name]; dup {
			p = append(p, "duplicate volume "+v.Name)
		}
		volumes[v.Name] = v
	}
	for _, c := range allContainers(pod) {
		var uv, asset []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			switch m.MountPath {
			case uvMountPath:
				uv = append(uv, m)
			case assetMountPath:
				asset = append(asset, m)
			}
		}
		if len(uv) != 1 {
			p = append(p, fmt.Sprintf("container %s: %d mounts at %s, want 1", c.Name, len(uv), uvMountPath))
		} else {
			v, ok := volumes[uv[0].Name]
			switch {
			case !ok:
				p = append(p, fmt.Sprintf("container %s: mount of missing volume %s", c.Name, uv[0].Name))
			case v.EmptyDir == nil:
				p = append(p, fmt.Sprintf("volume %s is not an emptyDir", v.Name))
			case v.EmptyDir.Medium != medium:
				p = append(p, fmt.Sprintf("volume %s: medium %q, want %q", v.Name, v.EmptyDir.Medium, medium))
			case v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(uvSizeLimit) != 0:
				p = append(p, fmt.Sprintf("volume %s: sizeLimit %v, want %s", v.Name, v.EmptyDir.SizeLimit, &uvSizeLimit))
			}
		}
		if len(asset) != 1 || !asset[0].ReadOnly {
			p = append(p, fmt.Sprintf("container %s: want one read-only mount at %s, have %v", c.Name, assetMountPath, asset))
		}
		var env []corev1.EnvVar
		for _, e := range c.Env {
			if e.Name == uvEnvName {
				env = append(env, e)
			}
		}
		if len(env) != 1 || env[0].Value != uvEnvValue {
			p = append(p, fmt.Sprintf("container %s: want %s=%s once, have %v", c.Name, uvEnvName, uvEnvValue, env))
		}
	}
	r := pod.Spec.Resources
	switch {
	case suite.podLevelDropped:
		if r != nil {
			p = append(p, fmt.Sprintf("pod-level resources %v on an apiserver that drops them", r))
		}
	case r == nil || r.Limits.Memory().IsZero():
		p = append(p, "no pod-level memory limit")
	case r.Limits.Memory().Cmp(headroom) < 0:
		p = append(p, fmt.Sprintf("pod-level memory limit %s below the %s headroom", r.Limits.Memory(), &headroom))
	default:
		p = append(p, requestProblems(pod)...)
	}
	return p
}

// requestProblems checks the pod-level memory request of a pod with a
// pod-level memory limit: it must be set, and when the containers request
// less than the limit it must be below the limit too. A pod-level limit
// without a request makes the apiserver default the request to the limit,
// which would wreck bin-packing.
func requestProblems(pod *corev1.Pod) []string {
	r := pod.Spec.Resources
	req, ok := r.Requests[corev1.ResourceMemory]
	if !ok {
		return []string{"no explicit pod-level memory request"}
	}
	var sum resource.Quantity
	for _, c := range pod.Spec.Containers {
		sum.Add(*c.Resources.Requests.Memory())
	}
	if limit := r.Limits.Memory(); sum.Cmp(*limit) < 0 && req.Cmp(*limit) >= 0 {
		return []string{fmt.Sprintf("pod-level memory request %s equals the limit %s though the containers request %s: it was defaulted to the limit", &req, limit, &sum)}
	}
	return nil
}

// untouchedProblems lists signs that the webhook changed a pod.
func untouchedProblems(pod *corev1.Pod) []string {
	var p []string
	if s, ok := pod.Annotations[mutate.StatusAnnotation]; ok {
		p = append(p, fmt.Sprintf("%s annotation %q", mutate.StatusAnnotation, s))
	}
	for _, c := range allContainers(pod) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == uvMountPath || m.MountPath == assetMountPath {
				p = append(p, fmt.Sprintf("container %s: mount at %s", c.Name, m.MountPath))
			}
		}
		for _, e := range c.Env {
			if e.Name == uvEnvName {
				p = append(p, fmt.Sprintf("container %s: env %s", c.Name, e.Name))
			}
		}
	}
	if pod.Spec.Resources != nil {
		p = append(p, "pod-level resources set")
	}
	return p
}

func allContainers(pod *corev1.Pod) []corev1.Container {
	return append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
}

func volumeByName(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// volumeAt returns the volume container c mounts at path.
func volumeAt(pod *corev1.Pod, c corev1.Container, path string) *corev1.Volume {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return volumeByName(pod, m.Name)
		}
	}
	return nil
}

func joinProblems(p []string) string { return "\n  - " + strings.Join(p, "\n  - ") }

// streamed is one create of createStream: when it started, relative to
// the change during made, and its error.
type streamed struct {
	phase streamPhase
	err   error
}

// streamPhase is when a create started: before during was called, while
// it ran, or after it had returned.
type streamPhase int32

const (
	beforeChange streamPhase = iota
	duringChange
	afterChange
)

type createTally []streamed

// createStream creates sandbox pods in ns one after another, 20 ms apart
// (dry runs: the admission chain runs whole, nothing is stored), from 300 ms
// before during until a second after it returns.
func createStream(t *testing.T, ns string, during func()) createTally {
	t.Helper()
	var phase atomic.Int32
	var out createTally
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			p := streamPhase(phase.Load())
			_, err := suite.cs.CoreV1().Pods(ns).Create(context.Background(), testkit.SandboxPod(ns, fmt.Sprintf("stream-%d", i), sleeping),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			// A create still in flight when the phase moved on may have
			// met either side of the change: it counts as during.
			if now := streamPhase(phase.Load()); now != p {
				p = duringChange
			}
			out = append(out, streamed{p, err})
		}
	})
	time.Sleep(300 * time.Millisecond)
	phase.Store(int32(duringChange))
	during()
	phase.Store(int32(afterChange))
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	return out
}

// tally counts the creates of s that which picks, those refused, and
// returns the first refusal.
func (s createTally) tally(which func(streamed) bool) (refused, total int, first error) {
	for _, c := range s {
		if !which(c) {
			continue
		}
		total++
		if c.err != nil {
			refused++
			if first == nil {
				first = c.err
			}
		}
	}
	return refused, total, first
}
