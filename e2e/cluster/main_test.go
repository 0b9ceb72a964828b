//go:build nodee2e

// Package cluster runs the whole system as users run it (make cluster-e2e):
// a two-node cluster of the pinned Kubernetes in a network and a mount
// namespace of its own, the webhook's image built here and installed with
// the chart, sandbox pods that run, and pod creates under disruption
// (docs/cluster.md).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
)

const (
	release   = "sandbox-webhook"
	releaseNS = "sandbox-webhook"
	fullname  = "sandbox-webhook"
)

var suite struct {
	root    string
	dir     string
	cluster *harness.Cluster
	cs      kubernetes.Interface
	helmLog strings.Builder
	// image is the webhook's image as the README's Install pushed it.
	image string
	// nodeLoss says, per power loss, when the control plane noticed it.
	nodeLoss []string
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster e2e:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := harness.RepoRoot(".")
	if err != nil {
		return 1, err
	}
	suite.root = root
	suite.dir = filepath.Join(root, "_output", "cluster")
	if !harness.InClusterNamespaces() {
		// Outside: build the server and its image (the Go toolchain may
		// need the module proxy), then run the tests in the namespaces.
		if os.Geteuid() != 0 {
			return 1, fmt.Errorf("the cluster e2e runs a node: it needs root (make cluster-e2e)")
		}
		// Outside, where the module proxy is: build what the README's
		// Install builds, so that it runs inside as written.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmds, err := readmeInstall(root)
		if err != nil {
			return 1, err
		}
		if err := warmBuild(ctx, root, cmds); err != nil {
			return 1, err
		}
		return harness.RunInClusterNamespaces()
	}
	if err := harness.SetUpClusterNamespaces(); err != nil {
		return 1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	// The registry the README's Install pushes to, in its host's place.
	reg, err := startRegistry(ctx, filepath.Join(root, "bin"), filepath.Join(suite.dir, "registry"))
	if err != nil {
		return 1, err
	}
	defer func() {
		_ = reg.Process.Kill()
		_ = reg.Wait()
	}()
	c, err := harness.StartCluster(ctx, harness.ClusterOptions{
		Dir:     filepath.Join(suite.dir, "run"),
		Bin:     filepath.Join(root, "bin"),
		Busybox: "/bin/busybox",
	})
	if err != nil {
		return 1, err
	}
	suite.cluster, suite.cs = c, c.Client
	fmt.Printf("cluster up in %s: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, containerd, kubelet\n", time.Since(start).Round(time.Second))
	code := 1
	if err = install(ctx); err == nil {
		code = m.Run()
	}
	stopErr := c.Stop()
	left, lerr := c.Leftovers()
	if len(left) > 0 {
		stopErr = fmt.Errorf("%w; left behind:\n  %s", stopErr, strings.Join(left, "\n  "))
	}
	if err == nil && (stopErr != nil || lerr != nil) {
		err = fmt.Errorf("stopping the cluster: %w", errors.Join(stopErr, lerr))
	}
	return code, err
}

// install runs the README's Install (registryAddr for its registry): the
// image and the chart pushed, the chart installed from the registry, and
// waits until both replicas are available and the apiserver sends sandbox
// pods to them.
func install(ctx context.Context) error {
	cmds, err := readmeInstall(suite.root)
	if err != nil {
		return err
	}
	if suite.image, err = pushedImage(cmds); err != nil {
		return err
	}
	if err := runReadmeInstall(ctx, suite.root, suite.cluster.Kubeconfig, cmds); err != nil {
		return err
	}
	if err := waitRollout(ctx); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	if _, err := suite.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	return harness.WaitMutating(ctx, suite.cs, loadPod("probe"), true)
}

// installValues are the chart's defaults but the image (the one the
// README's Install pushed) and the certificate mode, with more merged over
// them.
func installValues(more map[string]any) map[string]any {
	repo, tag, _ := strings.Cut(suite.image, ":v")
	v := map[string]any{
		"image":        map[string]any{"repository": repo, "tag": "v" + tag},
		"certificates": map[string]any{"mode": "selfManaged"},
	}
	for k, x := range more {
		v[k] = x
	}
	return v
}

// upgrade runs helm upgrade with installValues(more), as
// `helm upgrade --install` would, without waiting.
func upgrade(ctx context.Context, more map[string]any) (*releasev1.Release, error) {
	cfg, err := helmConfig()
	if err != nil {
		return nil, err
	}
	chrt, err := loader.Load(filepath.Join(suite.root, chart.Dir))
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = releaseNS
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = time.Minute
	rel, err := up.RunWithContext(ctx, release, chrt, installValues(more))
	if err != nil {
		return nil, fmt.Errorf("helm upgrade: %w\n%s", err, suite.helmLog.String())
	}
	r, _ := rel.(*releasev1.Release)
	return r, nil
}

func helmConfig() (*action.Configuration, error) {
	// The helm CLI's field manager: the README's `helm install` applied
	// the release as "helm", and upgrades here are a user's `helm upgrade`.
	kube.ManagedFieldsManager = "helm"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(suite.cluster.Kubeconfig)
	flags.Namespace = ptr.To(releaseNS)
	flags.CacheDir = ptr.To(filepath.Join(suite.dir, "helm-cache"))
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(&suite.helmLog, nil)))
	return cfg, cfg.Init(flags, releaseNS, "secret")
}

// waitRollout waits until the webhook's Deployment has rolled out: every
// replica updated and available, and no old one left.
func waitRollout(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last string
	for {
		d, err := suite.cs.AppsV1().Deployments(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
		if err == nil && rolledOut(d) {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("status %+v", d.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployment %s did not roll out: %s", fullname, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func rolledOut(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// loadPod is a sandbox pod that is never scheduled (no node has the
// label its nodeSelector asks for): created to be admitted, then deleted.
func loadPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "load-", Namespace: ns, Labels: map[string]string{"app": "sandbox", "load": "true"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"cluster-e2e.sandbox-webhook.io/never": "true"},
			Containers:   []corev1.Container{sandboxContainer()},
		},
	}
}

// sandboxContainer is the one container of the test's sandbox pods: it
// sleeps, with a memory request of its own.
func sandboxContainer() corev1.Container {
	return corev1.Container{
		Name: "sandbox", Image: harness.NodeImage, Command: []string{"sleep", "3600"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}
}
