//go:build nodee2e

package node

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

const (
	nodeName = "node-e2e"
	// modeLabel selects a namespace's webhook: each mode has its own
	// webhook process and configuration.
	modeLabel = "node-e2e.sandbox-webhook.io/mode"
	// Namespaces: the webhook in memory mode, in disk (leak-mitigation)
	// mode, and none at all.
	nsMemory = "node-memory"
	nsDisk   = "node-disk"
	nsPlain  = "node-plain"
	// nsRaise is memory mode with containerLimits: raise.
	nsRaise = "node-raise"
	// nsBudget has a /dev/shm and a disk budget (budgetPolicy).
	nsBudget = "node-budget"

	// The test policy's sizes, small so that the checks are quick: the uv
	// cache's tmpfs and the pod-level memory limit.
	cacheSize  = 64 << 20
	podLimit   = 200 << 20
	assetText  = "pre-staged SWE-rebench-V2 checkout\n"
	assetFile  = "README"
	cachePath  = "/root/.cache/uv"
	assetPath  = "/opt/rebench-v2"
	webhookEnv = "NODE_E2E_WEBHOOK"
)

// policyYAML is the seed policy (examples/policies/memory) with the cache's
// sizeLimit, the pod-level memory limit and the asset's host path to fill
// in: small sizes for the checks (testPolicy), the seed's for make io-bench.
const policyYAML = `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: node-e2e
spec:
  mode: memory
  match:
    podSelector:
      matchLabels:
        app: sandbox
  caches:
    - name: uv-cache
      mountPath: /root/.cache/uv
      sizeLimit: %s
  env:
    - name: UV_LINK_MODE
      value: copy
  memory:
    limit: %s
  assets:
    - name: rebench-v2
      mountPath: /opt/rebench-v2
      hostPath:
        path: %s
`

// budgetPolicy gives a sandbox a 256Mi /dev/shm (the runtime's is 64 MiB)
// and a disk budget of 64Mi, with room in memory for the shm's pages.
const budgetPolicy = `apiVersion: sandbox-webhook.io/v1alpha1
kind: SandboxPolicy
metadata:
  name: node-budget
spec:
  match:
    podSelector:
      matchLabels:
        app: sandbox
  memory:
    limit: 512Mi
  shm:
    sizeLimit: 256Mi
  disk:
    limit: 64Mi
    request: 16Mi
`

// testNamespace is a namespace of the run, with the webhook that serves it:
// leakMitigation is its --leak-mitigation ("" for no webhook at all).
type testNamespace struct {
	name, leakMitigation string
	policies             map[string][]byte
}

// Hooks of make io-bench (iobench_test.go, build tag iobench): a block
// device of its own under the node's directory, and namespaces of its own.
var (
	nodeDevice     func(ctx context.Context, dir string) (stop func() error, err error)
	benchNamespace func(assets string) []testNamespace
)

var suite struct {
	root string
	// namespaces are the run's namespaces, all emptied at the end.
	namespaces []string
	cs         *kubernetes.Clientset
	// config is the control plane's client config, for clients of a
	// test's own (one that collects warnings).
	config *rest.Config
	node   *harness.Node
	// webhookOff is set when NODE_E2E_WEBHOOK=off: the webhooks run but
	// their configurations are not installed, so pods run unmutated and
	// the checks must fail.
	webhookOff bool
}

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "node e2e: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (code int, err error) {
	flag.Parse()
	root, err := harness.RepoRoot(".")
	if err != nil {
		return 1, err
	}
	suite.root = root
	suite.webhookOff = os.Getenv(webhookEnv) == "off"
	bin := filepath.Join(root, "bin")
	if err := harness.CheckAssets(bin); err != nil {
		return 1, err
	}
	if err := harness.CheckNodeTools(filepath.Join(bin, "kubelet")); err != nil {
		return 1, err
	}
	// Everything of the run lives under _output/node (logs stay there).
	dir := filepath.Join(root, "_output", "node")
	if err := os.RemoveAll(dir); err != nil {
		return 1, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 1, err
	}
	ctx := context.Background()

	var wg sync.WaitGroup
	var binary string
	var buildErr error
	wg.Go(func() { binary, buildErr = harness.BuildWebhook(ctx, root, dir) })
	cpLog, err := os.Create(filepath.Join(dir, "controlplane.log"))
	if err != nil {
		return 1, err
	}
	defer cpLog.Close()
	cp, cpErr := harness.StartControlPlane(bin, cpLog)
	wg.Wait()
	if cpErr != nil {
		return 1, errors.Join(cpErr, buildErr)
	}
	var stops []func() error
	stopAll := sync.OnceValue(func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	})
	stops = append(stops, cp.Stop)
	defer func() {
		if serr := stopAll(); serr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", serr))
		}
		// The point of a teardown: nothing of the node is left.
		if suite.node != nil {
			left, lerr := suite.node.Leftovers()
			if lerr != nil || len(left) > 0 {
				err = errors.Join(err, lerr, fmt.Errorf("the node left behind:\n  %s", strings.Join(left, "\n  ")))
			} else {
				fmt.Println("node e2e: teardown clean: no processes, mounts or cgroups of the node left")
			}
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	go func() {
		if s, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "node e2e: %v: tearing down\n", s)
			_ = stopAll()
			os.Exit(1)
		}
	}()
	if buildErr != nil {
		return 1, buildErr
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig); err != nil {
		return 1, err
	}
	if suite.cs, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return 1, err
	}
	suite.config = cp.Config

	// The asset the policy mounts, staged on the "shared storage": under
	// /mnt, where policy validation lets a hostPath be, wherever the
	// repository is checked out (/tmp and /home are refused).
	shared, err := os.MkdirTemp("/mnt", "sandbox-webhook-node-e2e-")
	if err != nil {
		return 1, err
	}
	// Removed once the node is stopped (stops run last to first).
	stops = append(stops, func() error { return os.RemoveAll(shared) })
	assets := filepath.Join(shared, "rebench-v2")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return 1, err
	}
	if err := os.WriteFile(filepath.Join(assets, assetFile), []byte(assetText), 0o644); err != nil {
		return 1, err
	}
	policies := map[string][]byte{"node-e2e.yaml": fmt.Appendf(nil, policyYAML, "64Mi", "200Mi", assets)}
	raise := map[string][]byte{"node-e2e.yaml": bytes.Replace(policies["node-e2e.yaml"], []byte("\nspec:\n"), []byte("\nspec:\n  containerLimits: raise\n"), 1)}
	budget := map[string][]byte{"node-budget.yaml": []byte(budgetPolicy)}
	spaces := []testNamespace{{nsMemory, "off", policies}, {nsDisk, "on", policies}, {nsPlain, "", nil}, {nsRaise, "off", raise}, {nsBudget, "on", budget}}
	if benchNamespace != nil {
		spaces = append(spaces, benchNamespace(assets)...)
	}
	for _, ns := range spaces {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: map[string]string{modeLabel: ns.name}}}
		if _, err := suite.cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return 1, err
		}
		suite.namespaces = append(suite.namespaces, ns.name)
		// No controller-manager: the service account the pods name is
		// created here.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "default"}}
		if _, err := suite.cs.CoreV1().ServiceAccounts(ns.name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			return 1, err
		}
		if ns.leakMitigation == "" {
			continue
		}
		stop, err := startWebhook(ctx, binary, kubeconfig, filepath.Join(dir, ns.name), ns.name, ns.leakMitigation, ns.policies)
		if stop != nil {
			stops = append(stops, stop)
		}
		if err != nil {
			return 1, err
		}
	}

	nodeDir := filepath.Join(dir, "node")
	if nodeDevice != nil {
		stop, err := nodeDevice(ctx, nodeDir)
		if stop != nil {
			stops = append(stops, stop)
		}
		if err != nil {
			return 1, err
		}
	}
	node, err := harness.StartNode(ctx, harness.NodeOptions{
		Name:       nodeName,
		Dir:        nodeDir,
		Kubelet:    filepath.Join(bin, "kubelet"),
		Busybox:    "/bin/busybox",
		Kubeconfig: kubeconfig,
	})
	if node != nil {
		suite.node = node
		stops = append(stops, func() error { return errors.Join(deleteAllPods(), node.Stop()) })
	}
	if err != nil {
		return 1, err
	}
	if err := waitNode(ctx); err != nil {
		return 1, err
	}
	fmt.Printf("node e2e: control plane, webhooks, containerd and kubelet up (kernel %s)\n", kernelRelease())
	return m.Run(), nil
}

// startWebhook runs a webhook for namespace ns and installs its
// configuration (unless NODE_E2E_WEBHOOK=off).
func startWebhook(ctx context.Context, binary, kubeconfig, dir, ns, leakMitigation string, policies map[string][]byte) (func() error, error) {
	vol, err := harness.NewVolume(filepath.Join(dir, "policies"), policies)
	if err != nil {
		return nil, err
	}
	certs, err := harness.NewCerts(ctx, binary, filepath.Join(dir, "tls"), "127.0.0.1")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "webhook.log"))
	if err != nil {
		return nil, err
	}
	w, err := harness.StartWebhook(ctx, harness.WebhookOptions{
		Binary:         binary,
		Kubeconfig:     kubeconfig,
		CertDir:        certs.Dir(),
		Policies:       []string{vol.Dir},
		LeakMitigation: leakMitigation,
		Args:           []string{"--shutdown-delay", "200ms"},
		Log:            log,
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	stop := func() error { defer log.Close(); return w.Stop() }
	if suite.webhookOff {
		return stop, nil
	}
	mwc, err := chart.RenderWebhookConfiguration(ctx, suite.root, chart.ConfigOptions{
		Release:           ns,
		Namespace:         ns + "-system",
		URL:               w.URL(),
		CABundle:          certs.Current().CA,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: ns}},
	})
	if err != nil {
		return stop, err
	}
	if err := chart.InstallWebhookConfiguration(ctx, suite.cs, mwc); err != nil {
		return stop, err
	}
	return stop, harness.WaitMutating(ctx, suite.cs, testkit.SandboxPod(ns, "probe", onNode("sleep 1")), true)
}

// waitNode waits for the kubelet's Node object.
func waitNode(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if _, err := suite.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not registered; see %s", nodeName, suite.node.Log("kubelet"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deleteAllPods deletes the pods of the test namespaces and waits until the
// kubelet has stopped them and removed them from the API.
func deleteAllPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, ns := range suite.namespaces {
		pods, err := suite.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range pods.Items {
			errs = append(errs, deletePod(ctx, &pods.Items[i]))
		}
	}
	return errors.Join(errs...)
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
