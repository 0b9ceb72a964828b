package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
)

// suite is what TestMain sets up once for every test: one control plane and
// one build of each binary. Each test starts its own webhook process
// and configuration (see newInstance), scoped to its own namespaces.
var suite struct {
	root       string // repository root
	binary     string // the server binary under test (sandbox-webhook: serve, certs)
	cli        string // the command line under test (kubectl-sandbox_webhook: dry-run, check)
	kubeconfig string // admin kubeconfig for the webhook processes
	cp         *harness.ControlPlane
	cs         *kubernetes.Clientset
	// target is the kube-apiserver under test (E2E_KUBE_MINOR,
	// E2E_FEATURE_GATES); version is its /version gitVersion.
	target  harness.Target
	version string
	// podLevelDropped: this apiserver drops pod-level resources.
	podLevelDropped bool
}

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// runSuite sets the suite up, runs the tests and tears everything down. The
// control plane is not optional: missing binaries fail the suite.
func runSuite(m *testing.M) (code int, err error) {
	begin := time.Now()
	root, err := harness.RepoRoot(".")
	if err != nil {
		return 1, err
	}
	assets := filepath.Join(root, "bin")
	if err := harness.CheckAssets(assets); err != nil {
		return 1, err
	}
	tmp, err := os.MkdirTemp("", "sandbox-webhook-e2e-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(tmp)

	// No deadline of its own: on a cold machine the build compiles the
	// webhook's dependencies; go test's -timeout bounds the whole run.
	ctx := context.Background()
	start := time.Now()

	// The build and the control plane's start both take seconds; overlap them.
	var wg sync.WaitGroup
	var buildErr, cliErr error
	wg.Go(func() {
		if suite.binary, buildErr = harness.BuildWebhook(ctx, root, tmp); buildErr == nil {
			suite.cli, cliErr = harness.BuildCLI(ctx, root, tmp)
		}
	})
	cpLog, err := os.Create(filepath.Join(tmp, "controlplane.log"))
	if err != nil {
		return 1, err
	}
	defer cpLog.Close()
	suite.target = harness.TargetFromEnv()
	cp, cpErr := harness.StartTarget(assets, suite.target, cpLog)
	wg.Wait()
	if cpErr != nil {
		return 1, errors.Join(cpErr, buildErr, cliErr)
	}
	stopCP := sync.OnceValue(cp.Stop)
	defer func() {
		if serr := stopCP(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the control plane: %w", serr))
		}
	}()
	// kube-apiserver and etcd run in their own process groups: a Ctrl-C, a
	// closed terminal or go test's timeout would end this process without
	// the deferred stop and leave them running. Stop them first. (The
	// webhook processes die with this one: Pdeathsig.)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	go func() {
		if s, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "e2e: %v: stopping kube-apiserver and etcd\n", s)
			_ = stopCP()
			os.Exit(1)
		}
	}()
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, perr := time.ParseDuration(f.Value.String()); perr == nil && d > time.Minute {
			watchdog := time.AfterFunc(d-20*time.Second-time.Since(begin), func() {
				fmt.Fprintln(os.Stderr, "e2e: go test's timeout is near: stopping kube-apiserver and etcd")
				_ = stopCP()
			})
			defer watchdog.Stop()
		}
	}
	if err := errors.Join(buildErr, cliErr); err != nil {
		return 1, err
	}
	suite.root, suite.cp = root, cp
	suite.kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := cp.WriteKubeConfig(suite.kubeconfig); err != nil {
		return 1, err
	}
	if suite.cs, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return 1, err
	}
	if err := createRuntimeClasses(ctx, suite.cs); err != nil {
		return 1, err
	}
	v, err := suite.cs.Discovery().ServerVersion()
	if err != nil {
		return 1, err
	}
	suite.version = v.GitVersion
	if suite.podLevelDropped, err = podLevelDropped(suite.version, suite.target); err != nil {
		return 1, err
	}
	fmt.Printf("e2e: control plane (kube-apiserver %s, feature gates %q) and sandbox-webhook ready in %s\n",
		suite.version, suite.target.FeatureGates, time.Since(start).Round(time.Millisecond))
	return m.Run(), nil
}
