package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a local kube-apiserver backed by a local etcd. Pods are
// stored, never run: there is no scheduler, kubelet or controller-manager.
type ControlPlane struct {
	env *envtest.Environment
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
}

// ControlPlaneBinaries are the binaries StartControlPlane needs in its assets
// directory, the layout envtest calls KUBEBUILDER_ASSETS.
var ControlPlaneBinaries = []string{"kube-apiserver", "etcd"}

// CheckAssets reports an error that says how to fix it when a control-plane
// binary is missing from dir.
func CheckAssets(dir string) error {
	var missing []string
	for _, name := range ControlPlaneBinaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s missing from %s: run make tools", strings.Join(missing, " and "), dir)
	}
	return nil
}

// Target is the kube-apiserver a run of the suite tests: a minor of the
// version matrix and its feature gates.
type Target struct {
	// Minor is "1.NN" for bin/k8s-1.NN/kube-apiserver (hack/tools.sh
	// kube-apiserver@1.NN), or "" for the newest minor, bin/kube-apiserver.
	Minor string
	// FeatureGates is kube-apiserver's --feature-gates, e.g.
	// PodLevelResources=false; "" for the version's defaults.
	FeatureGates string
	// AdmissionConfigFile is kube-apiserver's
	// --admission-control-config-file, or "" for none.
	AdmissionConfigFile string
}

// TargetFromEnv reads E2E_KUBE_MINOR and E2E_FEATURE_GATES.
func TargetFromEnv() Target {
	return Target{Minor: os.Getenv("E2E_KUBE_MINOR"), FeatureGates: os.Getenv("E2E_FEATURE_GATES")}
}

// APIServer returns the kube-apiserver binary of t in assets.
func (t Target) APIServer(assets string) string {
	if t.Minor == "" {
		return filepath.Join(assets, "kube-apiserver")
	}
	return filepath.Join(assets, "k8s-"+t.Minor, "kube-apiserver")
}

// StartControlPlane starts kube-apiserver and etcd from the binaries in
// assets (the repository's bin/). The binaries are taken from assets even when
// KUBEBUILDER_ASSETS points elsewhere, so the version under test is the one
// e2e/tools pins. Their output goes to out when it is not nil.
func StartControlPlane(assets string, out io.Writer) (*ControlPlane, error) {
	return StartTarget(assets, Target{}, out)
}

// StartTarget is StartControlPlane for target t of the version matrix; every
// minor shares bin/etcd.
func StartTarget(assets string, t Target, out io.Writer) (*ControlPlane, error) {
	if err := CheckAssets(assets); err != nil {
		return nil, err
	}
	if _, err := os.Stat(t.APIServer(assets)); err != nil {
		return nil, fmt.Errorf("%s missing: run hack/tools.sh kube-apiserver@%s", t.APIServer(assets), t.Minor)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// A cold kube-apiserver on two busy cores can take longer than
		// envtest's 20s default to report healthy.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = t.APIServer(assets)
	if t.FeatureGates != "" {
		api.Configure().Append("feature-gates", t.FeatureGates)
	}
	if t.AdmissionConfigFile != "" {
		api.Configure().Set("admission-control-config-file", t.AdmissionConfigFile)
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd")}
	if out != nil {
		api.Out, api.Err = out, out
		env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = out, out
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves whatever did start running when a later step fails.
		return nil, errors.Join(fmt.Errorf("starting kube-apiserver and etcd: %w", err), env.Stop())
	}
	// Bursts of concurrent creates are the point of some tests: client-side
	// throttling (default 5 QPS) would measure the client, not the apiserver.
	cfg.QPS, cfg.Burst = 1000, 1000
	return &ControlPlane{env: env, Config: cfg}, nil
}

// KubeConfig returns a kubeconfig for an admin user of the control plane.
func (c *ControlPlane) KubeConfig() ([]byte, error) {
	user, err := c.env.AddUser(envtest.User{Name: "sandbox-webhook-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding an admin user: %w", err)
	}
	b, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return b, nil
}

// WriteKubeConfig writes an admin kubeconfig to path.
func (c *ControlPlane) WriteKubeConfig(path string) error {
	b, err := c.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Stop stops kube-apiserver and etcd and removes their data.
func (c *ControlPlane) Stop() error {
	return c.env.Stop()
}
