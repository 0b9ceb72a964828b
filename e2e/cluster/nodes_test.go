//go:build nodee2e

package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
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
	return spreadReplicas(ctx)
}

// spreadReplicas evicts a replica until one runs on each node (the chart's
// topology spread places the replacement on the emptier node).
func spreadReplicas(ctx context.Context) error {
	for range 3 {
		pods, err := replicaPods(ctx)
		if err != nil {
			return err
		}
		if pods[0].Spec.NodeName != pods[1].Spec.NodeName {
			return nil
		}
		if err := evictRetrying(ctx, releaseNS, pods[0].Name); err != nil {
			return err
		}
		if err := waitReplaced(ctx, pods[0].Name); err != nil {
			return err
		}
	}
	return fmt.Errorf("the replicas stay on one node after three evictions")
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
	if err := waitReplicasOn(ctx, map[string]int{"node": 1, lostNode: 1}); err != nil {
		return err
	}
	start := time.Now()
	if err := suite.cluster.PowerOff(); err != nil {
		return err
	}
	notReady, err := waitFor(ctx, 3*time.Minute, func() bool {
		n, err := suite.cs.CoreV1().Nodes().Get(ctx, lostNode, metav1.GetOptions{})
		return err == nil && !nodeReady(n)
	})
	if err != nil {
		return fmt.Errorf("%s never went NotReady: %w", lostNode, err)
	}
	gone, err := waitFor(ctx, 3*time.Minute, func() bool { return readyEndpoints(ctx) == 1 })
	if err != nil {
		return fmt.Errorf("the lost replica never left the endpoints: %w", err)
	}
	suite.nodeLoss = append(suite.nodeLoss, fmt.Sprintf("NotReady after %s, its replica out of the endpoints after %s", notReady.Sub(start).Round(time.Second), gone.Sub(start).Round(time.Second)))
	time.Sleep(10 * time.Second)
	if err := suite.cluster.PowerOn(); err != nil {
		return err
	}
	if _, err := waitFor(ctx, 3*time.Minute, func() bool {
		n, err := suite.cs.CoreV1().Nodes().Get(ctx, lostNode, metav1.GetOptions{})
		return err == nil && nodeReady(n)
	}); err != nil {
		return fmt.Errorf("%s not Ready again: %w", lostNode, err)
	}
	return waitReplicasOn(ctx, map[string]int{"node": 1, lostNode: 1})
}

// waitFor polls cond every 200 ms and returns when it first held.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if cond() {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
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

// webhookTimeout sets the chart's webhook.timeoutSeconds with helm upgrade
// (0: the chart's default), which changes the webhook configuration only,
// and waits until the webhook answers again.
func webhookTimeout(seconds int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var more map[string]any
		if seconds > 0 {
			more = map[string]any{"webhook": map[string]any{"timeoutSeconds": seconds}}
		}
		if _, err := upgrade(ctx, more); err != nil {
			return err
		}
		return harness.WaitMutating(ctx, suite.cs, loadPod("probe"), true)
	}
}
