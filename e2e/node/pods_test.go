//go:build nodee2e

package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// onNode binds a sandbox pod to the node, with one container that runs
// script with busybox's sh. It uses the host network: the node has no CNI
// plugin, and nothing here needs a pod network.
func onNode(script string) testkit.PodOption {
	return func(pod *corev1.Pod) {
		pod.Spec.NodeName = nodeName
		pod.Spec.HostNetwork = true
		pod.Spec.AutomountServiceAccountToken = ptr.To(false)
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.Containers = []corev1.Container{{
			Name:            "task",
			Image:           harness.NodeImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"/bin/sh", "-c", script},
		}}
	}
}

// runPod creates pod and waits until its container runs; it returns the pod
// as the kubelet reported it.
func runPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	if _, err := suite.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return waitPod(ctx, pod, "running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
	})
}

// waitPod polls pod until done holds (two minutes at most; a failed pod
// is an error at once).
func waitPod(ctx context.Context, pod *corev1.Pod, what string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	for {
		p, err := suite.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil {
			if done(p) {
				return p, nil
			}
			last = fmt.Sprintf("phase %s, %s", p.Status.Phase, containerState(p))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pod %s/%s not %s (%s); see %s", pod.Namespace, pod.Name, what, last, suite.node.Log("kubelet"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func containerState(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return "no container status"
	}
	s := p.Status.ContainerStatuses[0].State
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return fmt.Sprintf("waiting: %s %s", s.Waiting.Reason, s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s, exit code %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}

// deletePod deletes pod and waits until the kubelet has stopped it, removed
// it from the API and removed its cgroup.
func deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := suite.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := suite.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		_, cerr := os.Stat(podCgroup(pod, "memory"))
		if apierrors.IsNotFound(err) && os.IsNotExist(cerr) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("still in the API")
			}
			if cerr == nil {
				cerr = errors.New("still there")
			}
			return fmt.Errorf("pod %s/%s not gone (get: %w, cgroup: %w)", pod.Namespace, pod.Name, err, cerr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// containerID is the containerd id of the pod's first container.
func containerID(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	return strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
}

// podCgroup is the pod's cgroup in hierarchy, as the kubelet's cgroupfs
// driver names it: kubepods[/<qos>]/pod<uid>. A pod not yet stored (no uid)
// has none.
func podCgroup(p *corev1.Pod, hierarchy string) string {
	if p.UID == "" {
		return filepath.Join(os.TempDir(), "no-such-cgroup")
	}
	qos := ""
	switch p.Status.QOSClass {
	case corev1.PodQOSBurstable:
		qos = "burstable"
	case corev1.PodQOSBestEffort:
		qos = "besteffort"
	}
	return suite.node.Cgroup(hierarchy, filepath.Join("kubepods", qos, "pod"+string(p.UID)))
}

// memoryStat reads a memory cgroup's memory.stat.
func memoryStat(cgroup string) (map[string]int64, error) {
	b, err := os.ReadFile(filepath.Join(cgroup, "memory.stat"))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// readInt reads a cgroup file holding one integer.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
