package certs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// One kube-apiserver and etcd for the package's tests, started by the first
// test that needs it and stopped by TestMain.
var shared struct {
	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

// globalLogs collects what the libraries log through controller-runtime's
// global logger and klog (the rotator, reflectors): a refused list or watch
// shows up there as "forbidden".
var globalLogs = &logBuffer{}

func TestMain(m *testing.M) {
	logf.SetLogger(globalLogs.logger())
	klog.SetLogger(globalLogs.logger().WithName("klog"))
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.Exit(code)
}

// apiserver returns an admin configuration for a real kube-apiserver with
// cert-manager's Certificate CRD installed. It fails, never skips, when the
// binaries are missing: KUBEBUILDER_ASSETS, else the repository's bin/ (make tools).
func apiserver(t *testing.T) *rest.Config {
	t.Helper()
	shared.once.Do(func() {
		assets := os.Getenv("KUBEBUILDER_ASSETS")
		if assets == "" {
			assets = filepath.Join("..", "bin")
		}
		if assets, shared.err = filepath.Abs(assets); shared.err != nil {
			return
		}
		for _, bin := range []string{"kube-apiserver", "etcd"} {
			if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
				shared.err = fmt.Errorf("envtest needs %s in %s (run `make tools`): %w", bin, assets, err)
				return
			}
		}
		// envtest looks here first, even when the variable is set but empty.
		if shared.err = os.Setenv("KUBEBUILDER_ASSETS", assets); shared.err != nil {
			return
		}
		crd, err := certManagerCRD("cert-manager.io_certificates.yaml")
		if err != nil {
			shared.err = err
			return
		}
		shared.env = &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths:     []string{crd},
			ErrorIfCRDPathMissing: true,
		}
		shared.cfg, shared.err = shared.env.Start()
		if shared.err != nil {
			shared.env = nil
		}
	})
	if shared.err != nil {
		t.Fatalf("starting kube-apiserver: %v", shared.err)
	}
	return shared.cfg
}

// certManagerCRD is a CRD file from deploy/crds/ of the cert-manager module this
// repository depends on (the module cache holds it after `go mod download`).
func certManagerCRD(name string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", fmt.Errorf("locating the cert-manager module: %w", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds", name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("cert-manager CRD: %w", err)
	}
	return path, nil
}

// restrictedUser returns a configuration for a new user that holds exactly the
// rules of o.RBAC(): a Role in o.Namespace and a ClusterRole.
func restrictedUser(t *testing.T, admin *rest.Config, o *Options) *rest.Config {
	t.Helper()
	cfg := userWithRules(t, admin, "", o).Config()
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

// userWithRules is restrictedUser with extra cluster-wide rules; suffix tells
// several users of one test apart.
func userWithRules(t *testing.T, admin *rest.Config, suffix string, o *Options, extra ...rbacv1.PolicyRule) *envtest.AuthenticatedUser {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(admin)
	name := "certs-test-" + o.Namespace + suffix // namespaces are generated, so unique
	user, err := shared.env.AddUser(envtest.User{Name: name}, admin)
	if err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	role, clusterRole := o.RBAC()
	clusterRole = append(clusterRole, extra...)
	if len(role) > 0 {
		if _, err := kube.RbacV1().Roles(o.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: role}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(clusterRole) > 0 {
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: clusterRole}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return user
}

func createNamespace(t *testing.T, admin *rest.Config, prefix string) string {
	t.Helper()
	ns, err := kubernetes.NewForConfigOrDie(admin).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// waitLimit bounds the waits: generous, to catch a hang, not a slow run.
const waitLimit = 90 * time.Second

// logBuffer collects log lines from a funcr logger, safely across goroutines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.NewJSON(func(obj string) {
		b.mu.Lock()
		b.lines = append(b.lines, obj)
		b.mu.Unlock()
		if testing.Verbose() {
			fmt.Fprintln(os.Stderr, obj)
		}
	}, funcr.Options{})
}

// find returns the first line holding every one of the substrings.
func (b *logBuffer) find(subs ...string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
next:
	for _, l := range b.lines {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		return l, true
	}
	return "", false
}

// waitLogged waits for a log line holding every one of subs and returns it.
func (b *logBuffer) waitLogged(t *testing.T, subs ...string) string {
	t.Helper()
	var line string
	testkit.WaitFor(t, fmt.Sprintf("a log line with %q", subs), waitLimit, func() error {
		var ok bool
		if line, ok = b.find(subs...); !ok {
			return fmt.Errorf("not logged")
		}
		return nil
	})
	return line
}

// gauge reads a gauge without labels from reg.
func gauge(reg prometheus.Gatherer, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("metric %s not registered", name)
}

// setup sets o's mode up on a manager of its own for cfg, as serve does on
// its manager; the logger comes from ctx.
func setup(ctx context.Context, o *Options, cfg *rest.Config, certDir string) (*Runner, manager.Manager, error) {
	mgr, err := manager.New(cfg, manager.Options{
		Logger:                 logf.FromContext(ctx),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, nil, err
	}
	r, err := o.Setup(ctx, mgr, certDir)
	return r, mgr, err
}

// runManager starts mgr in the background and returns a function that stops
// it and returns Start's error, as r explains it.
func runManager(t *testing.T, ctx context.Context, mgr manager.Manager, r *Runner) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Explain(mgr.Start(ctx)) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return stop
}

func pemEqual(a, b []byte) bool { return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b)) }

// Markers of funcr's JSON lines: Error adds an "error" key, Info a "level".
const (
	errorLine = `"error":`
	infoLine  = `"level":0`
)
