//go:build nodee2e

package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

// TestWebhookRunsAsPods: the chart's Deployment runs the image built here
// as two pods that became Ready through their probes, as the chart's
// security context says, behind a Service with both as endpoints, and the
// self-managed certificate's CA is in the webhook configuration.
func TestWebhookRunsAsPods(t *testing.T) {
	ctx := t.Context()
	pods := webhookPods(t)
	if len(pods) != 2 {
		t.Fatalf("%d webhook pods, want the chart's 2", len(pods))
	}
	// The chart's topology spread (ScheduleAnyway, maxSkew 1 by hostname)
	// puts one on each of the two nodes.
	if pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Errorf("both webhook pods on node %q: the chart's topology spread did not spread them", pods[0].Spec.NodeName)
	}
	for _, p := range pods {
		t.Logf("webhook pod %s on node %s", p.Name, p.Spec.NodeName)
		c := p.Spec.Containers[0]
		if c.Image != suite.image {
			t.Errorf("%s runs %s, want %s, the image the README's Install pushed", p.Name, c.Image, suite.image)
		}
		if !podReady(&p) {
			t.Errorf("%s is not Ready", p.Name)
		}
		if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
			t.Errorf("%s: root filesystem not read-only", p.Name)
		}
		if u := p.Spec.SecurityContext.RunAsUser; u == nil || *u != 65532 {
			t.Errorf("%s: runAsUser %v, want 65532", p.Name, u)
		}
	}
	if ready := readyEndpoints(ctx); ready != 2 {
		t.Errorf("service %s has %d ready endpoints, want 2", fullname, ready)
	}
	mwc, err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			t.Errorf("webhook %s: empty caBundle", w.Name)
		}
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Name != fullname {
			t.Errorf("webhook %s: not through the Service %s: %+v", w.Name, fullname, w.ClientConfig)
		}
	}
}

// TestSandboxDeployment: a Deployment of sandbox pods is scheduled and
// started, one on each node; every pod is mutated and gets what the node e2e
// checks: a tmpfs uv cache of 1Gi, UV_LINK_MODE=copy in its process, and
// the pod cgroup's memory limit at the policy's 8Gi.
func TestSandboxDeployment(t *testing.T) {
	ctx := t.Context()
	ns := createNamespace(t, "sandboxes")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{sandboxContainer()},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sandbox"}},
					}},
				},
			},
		},
	}
	if _, err := suite.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := suite.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=sandbox"})
		if err != nil {
			t.Fatal(err)
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && podReady(&p) {
				pods = append(pods, p)
			}
		}
		if len(pods) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 sandbox pods running: %+v", len(pods), list.Items)
		}
		time.Sleep(time.Second)
	}
	for _, p := range pods {
		if !harness.Mutated(&p) {
			t.Errorf("%s: not mutated", p.Name)
			continue
		}
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		node := suite.cluster.Nodes[p.Spec.NodeName]
		if node == nil {
			t.Errorf("%s: on node %q, not one of the cluster's", p.Name, p.Spec.NodeName)
			continue
		}
		out, err := node.Exec(ctx, id, `grep " /root/.cache/uv " /proc/mounts; echo "UV_LINK_MODE=$UV_LINK_MODE"`)
		if err != nil {
			t.Errorf("%s: %v: %s", p.Name, err, out)
			continue
		}
		if !strings.Contains(out, "tmpfs /root/.cache/uv tmpfs") || !strings.Contains(out, "size=1048576k") {
			t.Errorf("%s: /root/.cache/uv is not a 1Gi tmpfs: %q", p.Name, out)
		}
		if !strings.Contains(out, "UV_LINK_MODE=copy") {
			t.Errorf("%s: UV_LINK_MODE not copy: %q", p.Name, out)
		}
		limit, err := podMemoryLimit(node, &p)
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
		} else if limit != 8<<30 {
			t.Errorf("%s: pod cgroup memory limit %d, want 8Gi", p.Name, limit)
		}
	}
}

// podMemoryLimit reads the pod cgroup's memory limit on its node (v1).
func podMemoryLimit(node *harness.Node, p *corev1.Pod) (int64, error) {
	for _, qos := range []string{"burstable/", "besteffort/", ""} {
		f := node.Cgroup("memory", "kubepods/"+qos+"pod"+string(p.UID)) + "/memory.limit_in_bytes"
		var v int64
		if b, err := os.ReadFile(f); err == nil {
			if _, err := fmt.Sscan(string(b), &v); err == nil {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("no memory cgroup for pod %s", p.UID)
}

func webhookPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := suite.cs.CoreV1().Pods(releaseNS).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sandbox-webhook"})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func createNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := suite.cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = suite.cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}
