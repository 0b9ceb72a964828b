//go:build nodee2e

package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// lostNode is the node the node scenarios drain and power off: the one
// with a network namespace (and a link) of its own.
const lostNode = "node2"

// drainNode drains lostNode as kubectl drain does: cordon, then evict every
// pod on it through the eviction API, retrying while a PodDisruptionBudget
// refuses (429), until the webhook has two ready replicas again, both on the
// other node; then uncordon it and move one replica back (an eviction), so
// that the replicas are spread again for what follows.
func drainNode(ctx context.Context) error {
	if err := cordon(ctx, true); err != nil {
		return err
	}
	pods, err := suite.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + lostNode})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if err := evictRetrying(ctx, p.Namespace, p.Name); err != nil {
			return err
		}
	}
	if err := waitReplicasOn(ctx, map[string]int{"node": 2}); err != nil {
		return err
	}
	if err := cordon(ctx, false); err != nil {
		return err
	}
	_, err = spreadReplicas(ctx)
	return err
}

// spreadReplicas evicts a replica from the fullest node until each node
// runs one at least (the chart's topology spread places the replacement on
// the emptier node), and returns the ready replicas per node.
func spreadReplicas(ctx context.Context) (map[string]int, error) {
	for range 3 {
		pods, err := replicaPods(ctx)
		if err != nil {
			return nil, err
		}
		on := map[string]int{}
		var fullest *corev1.Pod
		for i, p := range pods {
			on[p.Spec.NodeName]++
			if fullest == nil || on[p.Spec.NodeName] > on[fullest.Spec.NodeName] {
				fullest = &pods[i]
			}
		}
		if on["node"] > 0 && on[lostNode] > 0 {
			return on, nil
		}
		if err := evictRetrying(ctx, releaseNS, fullest.Name); err != nil {
			return nil, err
		}
		if err := waitReplaced(ctx, fullest.Name); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("the replicas stay on one node after three evictions")
}

func cordon(ctx context.Context, on bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
	_, err := suite.cs.CoreV1().Nodes().Patch(ctx, lostNode, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// evictRetrying evicts a pod, retrying while a PodDisruptionBudget
// refuses, as kubectl drain does.
func evictRetrying(ctx context.Context, ns, name string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := suite.cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsTooManyRequests(err) || time.Now().After(deadline):
			return fmt.Errorf("evicting %s/%s: %w", ns, name, err)
		}
		time.Sleep(time.Second)
	}
}

// waitReplicasOn waits until the ready replicas per node are want.
func waitReplicasOn(ctx context.Context, want map[string]int) error {
	deadline := time.Now().Add(3 * time.Minute)
	var got map[string]int
	for time.Now().Before(deadline) {
		got = map[string]int{}
		if pods, err := replicaPods(ctx); err == nil {
			for _, p := range pods {
				got[p.Spec.NodeName]++
			}
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("ready replicas per node %v, want %v", got, want)
}

// powerLoss powers lostNode off (harness.Cluster.PowerOff) with a replica
// on it, until the control plane has marked it NotReady and taken its
// replica out of the Service's endpoints, and some seconds more; then powers
// it back on and waits until it is Ready and both replicas serve again. It
// reports when the node went NotReady and the endpoint went away.
func powerLoss(ctx context.Context) error {
	// Fresh replicas, so that the API server's connections are dialled
	// while every replica serves, as after an install: after an earlier
	// power loss it holds none to the replica that was lost, and the next
	// loss of that replica would cost nothing.
	if err := restartReplicas(ctx); err != nil {
		return err
	}
	on, err := spreadReplicas(ctx)
	if err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	held, err := heldConnections(ctx)
	if err != nil {
		return err
	}
	serving := on["node"]
	start := time.Now()
	if err := suite.cluster.PowerOff(); err != nil {
		return err
	}
	notReady, err := testkit.Poll(ctx, 3*time.Minute, func() error { return nodeIs(ctx, lostNode, false) })
	if err != nil {
		return fmt.Errorf("%s never went NotReady: %w", lostNode, err)
	}
	gone, err := testkit.Poll(ctx, 3*time.Minute, func() error {
		if n := readyEndpoints(ctx); n != serving {
			return fmt.Errorf("%d ready endpoints", n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the lost replica never left the endpoints: %w", err)
	}
	suite.nodeLoss = append(suite.nodeLoss, fmt.Sprintf("the API server held %d connections to the lost node's replicas and %d to the others; NotReady after %s, its replica out of the endpoints after %s",
		held[lostNode], held["node"], notReady.Sub(start).Round(time.Second), gone.Sub(start).Round(time.Second)))
	time.Sleep(10 * time.Second)
	if err := suite.cluster.PowerOn(); err != nil {
		return err
	}
	if _, err := testkit.Poll(ctx, 3*time.Minute, func() error { return nodeIs(ctx, lostNode, true) }); err != nil {
		return fmt.Errorf("%s not Ready again: %w", lostNode, err)
	}
	return waitReplicasOn(ctx, on)
}

// restartReplicas replaces every replica, as kubectl rollout restart does,
// and waits for the rollout.
func restartReplicas(ctx context.Context) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := suite.cs.AppsV1().Deployments(releaseNS).Patch(ctx, fullname, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	return waitRollout(ctx)
}

// heldConnections counts the API server's established connections to the
// webhook's Service per node of the replica they reach, from the
// conntrack table of the cluster's network namespace (the API server and
// kube-proxy's NAT live there).
func heldConnections(ctx context.Context) (map[string]int, error) {
	svc, err := suite.cs.CoreV1().Services(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := replicaPods(ctx)
	if err != nil {
		return nil, err
	}
	nodeOf := map[string]string{}
	for _, p := range pods {
		nodeOf[p.Status.PodIP] = p.Spec.NodeName
	}
	out, err := exec.CommandContext(ctx, "conntrack", "-L", "-p", "tcp", "--orig-dst", svc.Spec.ClusterIP, "--orig-port-dst", "443", "--state", "ESTABLISHED").Output()
	if err != nil {
		return nil, fmt.Errorf("conntrack: %w", err)
	}
	held := map[string]int{}
	for line := range strings.Lines(string(out)) {
		// The reply tuple's source is the replica: the second src=.
		if f := strings.Split(line, " src="); len(f) >= 3 {
			ip, _, _ := strings.Cut(f[2], " ")
			held[nodeOf[ip]]++
		}
	}
	return held, nil
}

// nodeIs returns nil when node's readiness is ready.
func nodeIs(ctx context.Context, node string, ready bool) error {
	n, err := suite.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if nodeReady(n) != ready {
		return fmt.Errorf("node %s Ready=%v", node, nodeReady(n))
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyEndpoints counts the webhook Service's ready endpoints (-1 when
// they cannot be listed).
func readyEndpoints(ctx context.Context) int {
	eps, err := suite.cs.DiscoveryV1().EndpointSlices(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + fullname})
	if err != nil {
		return -1
	}
	n := 0
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) {
				n++
			}
		}
	}
	return n
}

// aggregatorRouting restarts the API server with --enable-aggregator-routing
// on or off. On, it calls a webhook at a ready endpoint of its Service that
// it picks itself for each new connection, instead of the Service's cluster
// IP through kube-proxy. The webhook is called once before it returns, so
// that the first creates after it do not wait for a connection.
func aggregatorRouting(on bool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := suite.cluster.RestartAPIServer(ctx, fmt.Sprintf("--enable-aggregator-routing=%t", on)); err != nil {
			return err
		}
		return harness.WaitMutating(ctx, suite.cs, loadPod("probe"), true)
	}
}

// withValues upgrades the release with more values over the install's
// (nil: back to them), waits until the rollout, if any, is done and the
// replicas are spread over both nodes, and the webhook answers.
func withValues(more map[string]any) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if _, err := upgrade(ctx, more); err != nil {
			return err
		}
		if err := waitRollout(ctx); err != nil {
			return err
		}
		if _, err := spreadReplicas(ctx); err != nil {
			return err
		}
		return harness.WaitMutating(ctx, suite.cs, loadPod("probe"), true)
	}
}

// guardOff is the webhook.guard value that turns it off.
var guardOff = map[string]any{"enabled": false}

// webhookValues is withValues of webhook.* values.
func webhookValues(w map[string]any) func(ctx context.Context) error {
	return withValues(map[string]any{"webhook": w})
}
