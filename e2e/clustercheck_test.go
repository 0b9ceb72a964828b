package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

// TestClusterCheck runs `kubectl-sandbox_webhook check` against the real apiserver,
// with a webhook installed by the chart's configuration under
// failurePolicy Ignore: a pod mutated as expected; a pod the objectSelector
// never sends (check names the selector and the fix); a pod created while
// the webhook was down (check reports it unmutated); a policy changed after
// a pod's creation (drift); the policies read from the release's ConfigMap;
// a Deployment's pod template.
func TestClusterCheck(t *testing.T) {
	const ns = "clustercheck"
	in := newInstance(t, "clustercheck", instanceOptions{
		namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: ns}}},
		values:     map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"}},
	})
	kubeconfig := suite.kubeconfig
	check := func(t *testing.T, args ...string) harness.Result {
		t.Helper()
		args = append([]string{"check"}, args...)
		args = append(args, "--kubeconfig", kubeconfig, "-n", ns, "--configuration", in.mwc.Name)
		r, err := harness.RunCommand(t.Context(), suite.cli, args...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	expect := func(t *testing.T, r harness.Result, code int, wants ...string) {
		t.Helper()
		if r.ExitCode != code {
			t.Errorf("exit code %d, want %d", r.ExitCode, code)
		}
		for _, w := range wants {
			if !strings.Contains(string(r.Stdout), w) {
				t.Errorf("stdout lacks %q", w)
			}
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		}
	}
	webhook := in.mwc.Name + "/" + in.mwc.Webhooks[0].Name

	createPod(t, testkit.SandboxPod(ns, "mutated", sleeping))
	// Every check below runs as a user with only the read-only RBAC that
	// docs/install.md documents.
	kubeconfig = readOnlyKubeconfig(t)
	t.Run("mutated as expected", func(t *testing.T) {
		r := check(t, "pod", "mutated", "--policy", in.policies.Dir)
		expect(t, r, 0,
			"Pod "+ns+"/mutated:\n",
			"webhook "+webhook+": sends the pod (failurePolicy Ignore)\n",
			"sandbox-seed: matched (enforce, memory mode",
			"injected: cache/uv-cache, asset/rebench-v2:hostPath, env/UV_LINK_MODE, memory/pod\n",
			"verdict: mutated as the current policies say\n")

		r = check(t, "pod", "mutated", "--policy", in.policies.Dir, "-o", "json")
		var rep struct {
			OK       bool
			Exists   bool
			Webhooks []struct{ Sends bool }
			Policies []struct {
				Name    string
				Matched bool
			}
		}
		if err := json.Unmarshal(r.Stdout, &rep); err != nil {
			t.Fatalf("-o json: %v\n%s", err, r.Stdout)
		}
		if !rep.OK || !rep.Exists || len(rep.Webhooks) != 1 || !rep.Webhooks[0].Sends || len(rep.Policies) != 1 || !rep.Policies[0].Matched {
			t.Errorf("-o json: %+v", rep)
		}
	})

	t.Run("policies from the release's ConfigMap", func(t *testing.T) {
		files, err := harness.ReadDir(filepath.Join(suite.root, "examples/policies/memory")) // the instance's policies
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: in.mwc.Name + "-policies", Namespace: in.ownNamespace}, Data: map[string]string{}}
		for k, v := range files {
			cm.Data[k] = string(v)
		}
		if _, err := suite.cs.CoreV1().ConfigMaps(in.ownNamespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := check(t, "pod", "mutated", "--release-namespace", in.ownNamespace)
		expect(t, r, 0, "policies: ConfigMap "+in.ownNamespace+"/"+cm.Name+" (leak mitigation policy)\n", "verdict: mutated as the current policies say\n")
	})

	t.Run("outside the objectSelector", func(t *testing.T) {
		pod := plainPod(ns, "agent")
		pod.Labels = map[string]string{"agents.x-k8s.io/sandbox-name-hash": "7c9e2f1a"}
		createPod(t, pod)
		r := check(t, "pod", "agent", "--policy", filepath.Join(suite.root, "examples/policies/fleet"))
		expect(t, r, 4,
			"webhook "+webhook+": does not send the pod: the pod's labels do not match the objectSelector (app=sandbox)\n",
			"    fix: label the pod's template to match the objectSelector, or set webhook.objectSelector",
			"sandbox-fleet: matched by match.any[2]",
			"drift: the pod was not mutated, but the current policies select it (sandbox-fleet): the webhook configuration does not send it\n",
			"verdict: not mutated: the policies select the pod, but no webhook configuration sends it")
	})

	t.Run("created while the webhook was down", func(t *testing.T) {
		if err := in.webhook.Stop(); err != nil {
			t.Fatal(err)
		}
		got := createPod(t, testkit.SandboxPod(ns, "while-down", sleeping))
		if harness.Mutated(got) {
			t.Fatal("the pod was mutated while the webhook was down")
		}
		if err := in.webhook.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := harness.WaitMutating(t.Context(), suite.cs, testkit.SandboxPod(ns, "probe", sleeping), true); err != nil {
			t.Fatal(err)
		}
		r := check(t, "pod", "while-down", "--policy", in.policies.Dir)
		expect(t, r, 4,
			"sends the pod (failurePolicy Ignore)\n",
			"drift: the pod was not mutated, but the current policies select it (sandbox-seed): it was created while the webhook did not answer (failurePolicy Ignore)",
			"verdict: mutated at creation differently from what the current policies do")
	})

	t.Run("policy changed after creation", func(t *testing.T) {
		files, err := harness.ReadDir(filepath.Join(suite.root, "examples/policies/memory")) // the instance's policies
		if err != nil {
			t.Fatal(err)
		}
		const seed = "sandbox-seed.yaml"
		changed := strings.Replace(string(files[seed]), "sizeLimit: 1Gi", "sizeLimit: 2Gi", 1)
		if changed == string(files[seed]) {
			t.Fatalf("%s has no sizeLimit: 1Gi to change", seed)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, seed), []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		r := check(t, "pod", "mutated", "--policy", dir)
		expect(t, r, 4, "drift: policy sandbox-seed: created under an older version (hash ",
			"verdict: mutated at creation differently from what the current policies do")

		r = check(t, "pod", "mutated", "--policy", in.policies.Dir, "--leak-mitigation", "on")
		expect(t, r, 4, "drift: policy sandbox-seed: mutated in memory mode, but now runs in disk mode")
	})

	t.Run("a pod before it is created (-f)", func(t *testing.T) {
		r := check(t, "-f", filepath.Join(suite.root, "examples/pods/sandbox.yaml"), "--policy", in.policies.Dir)
		expect(t, r, 0, "Pod "+ns+"/rollout-(generated):\n", "sends the pod (failurePolicy Ignore)\n",
			"verdict: will be mutated as the policies above say\n")
	})

	t.Run("matchConditions", func(t *testing.T) {
		withMC := in.mwc.DeepCopy()
		withMC.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{
			Name:       "not-skipped",
			Expression: "!('skip' in object.metadata.?annotations.orValue({}))",
		}}
		in.install(t, withMC)
		defer in.install(t, in.mwc)
		pod := testkit.SandboxPod(ns, "skipped", sleeping)
		pod.Annotations = map[string]string{"skip": "true"}
		b, err := yaml.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "pod.yaml")
		if err := os.WriteFile(file, append([]byte("apiVersion: v1\nkind: Pod\n"), b...), 0o644); err != nil {
			t.Fatal(err)
		}
		// The command line evaluates them with the apiserver's CEL matcher.
		expect(t, check(t, "-f", file, "--policy", in.policies.Dir), 4, "webhook "+webhook+`: does not send the pod: matchCondition "not-skipped" is false for the pod`+"\n",
			"verdict: not mutated: the policies select the pod, but no webhook configuration sends it")
		expect(t, check(t, "-f", filepath.Join(suite.root, "examples/pods/sandbox.yaml"), "--policy", in.policies.Dir), 0, "    matchConditions (all hold for the pod): not-skipped: ")
	})

	t.Run("deployment", func(t *testing.T) {
		pod := testkit.SandboxPod(ns, "", sleeping)
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "warm-pool", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec},
			},
		}
		if _, err := suite.cs.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := check(t, "deployment", "warm-pool", "--policy", in.policies.Dir)
		expect(t, r, 0, "Deployment "+ns+"/warm-pool:\n", "sends the pod", "verdict: will be mutated as the policies above say\n")
	})

	// The chart leaves its own namespace out by name: nothing to fix there.
	t.Run("release namespace", func(t *testing.T) {
		args := []string{"check", "-f", filepath.Join(suite.root, "examples/pods/sandbox.yaml"), "--policy", in.policies.Dir,
			"--kubeconfig", kubeconfig, "-n", in.ownNamespace, "--configuration", in.mwc.Name}
		r, err := harness.RunCommand(t.Context(), suite.cli, args...)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, r, 0,
			"does not send the pod: the namespaceSelector excludes namespace "+in.ownNamespace+" by name",
			"    fix: none: the configuration leaves this namespace out on purpose",
			"verdict: not mutated: the webhook configuration leaves namespace "+in.ownNamespace+" out by name, on purpose\n")
	})

	// The server's leak-mitigation mode flips (its mounted config file);
	// check reads the mode from --status-url instead of assuming the
	// policies' own: a pod created in disk mode has not drifted, one created
	// before the flip has.
	t.Run("mode from the server", func(t *testing.T) {
		status := fmt.Sprintf("http://127.0.0.1:%d/status", in.webhook.HealthPort)
		if err := in.config.Update(map[string][]byte{leakMitigationKey: []byte("on\n")}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := in.config.Update(map[string][]byte{leakMitigationKey: []byte("policy\n")}); err != nil {
				t.Error(err)
			}
		}()
		testkit.WaitFor(t, "leak-mitigation on to reach the webhook", time.Minute, func() error {
			return uvMedium(t, ns, corev1.StorageMediumDefault)
		})
		createPod(t, testkit.SandboxPod(ns, "disk", sleeping))
		expect(t, check(t, "pod", "disk", "--policy", in.policies.Dir, "--status-url", status), 0,
			"policies: --policy "+in.policies.Dir+" (leak mitigation on)\n",
			"sandbox-seed: matched (enforce, disk mode",
			"verdict: mutated as the current policies say\n")
		expect(t, check(t, "pod", "mutated", "--policy", in.policies.Dir, "--status-url", status), 4,
			"drift: policy sandbox-seed: mutated in memory mode, but now runs in disk mode")
		// Without it, check cannot know the mode and reports drift that is not there.
		expect(t, check(t, "pod", "disk", "--policy", in.policies.Dir), 4,
			"drift: policy sandbox-seed: mutated in disk mode, but now runs in memory mode")

		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "seed.yaml"), []byte(strings.Replace(string(mustRead(t, filepath.Join(in.policies.Dir, "sandbox-seed.yaml"))), "sizeLimit: 1Gi", "sizeLimit: 3Gi", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		expect(t, check(t, "pod", "disk", "--policy", other, "--status-url", status), 4,
			"Warning: the server serves policy set ")
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readOnlyKubeconfig grants a user the rules docs/install.md documents for
// check, and returns a kubeconfig that impersonates that user.
func readOnlyKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	doc, err := os.ReadFile(filepath.Join(suite.root, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)The RBAC it needs.*?```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install.md documents no RBAC for check")
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(m[1], role); err != nil {
		t.Fatalf("docs/install.md's RBAC for check: %v", err)
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("the documented RBAC grants %q on %v: check must only read", v, r.Resources)
			}
		}
	}
	const user = "sandbox-webhook-checker"
	role.Name = user
	if _, err := suite.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := suite.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = suite.cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
		_ = suite.cs.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	cfg, err := clientcmd.LoadFromFile(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	// The RBAC is in force: the user may not write.
	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("%s created a ConfigMap (err %v): the RBAC is not in force", user, err)
	}
	r, err := harness.RunCommand(ctx, suite.cli, "check", "--kubeconfig", path, "-n", "default", "pod", "none")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Stderr), `pods "none" not found`) {
		t.Fatalf("a missing pod, read as %s: exit %d, stderr:\n%s", user, r.ExitCode, r.Stderr)
	}
	return path
}

// TestClusterCheckInstall runs `kubectl-sandbox_webhook check install` against the
// real apiserver and webhook: a healthy install passes; a policy set the
// server does not serve, with selections the objectSelector never sends,
// fails naming both; a caBundle from another CA fails naming the caBundle.
func TestClusterCheckInstall(t *testing.T) {
	in := newInstance(t, "checkinstall", instanceOptions{})
	kubeconfig := readOnlyKubeconfig(t)
	webhook := in.mwc.Name + "/" + in.mwc.Webhooks[0].Name
	status := fmt.Sprintf("http://127.0.0.1:%d/status", in.webhook.HealthPort)
	install := func(t *testing.T, wantCode int, args ...string) string {
		t.Helper()
		args = append([]string{"check", "install", "--kubeconfig", kubeconfig, "--configuration", in.mwc.Name, "--status-url", status}, args...)
		r, err := harness.RunCommand(t.Context(), suite.cli, args...)
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode != wantCode {
			t.Errorf("exit code %d, want %d:\n%s%s", r.ExitCode, wantCode, r.Stdout, r.Stderr)
		}
		return string(r.Stdout)
	}
	contains := func(t *testing.T, out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}

	t.Run("healthy", func(t *testing.T) {
		out := install(t, 0, "--policy", filepath.Join(suite.root, "examples/policies/memory"))
		contains(t, out,
			"ok: "+webhook+": the caBundle verifies the certificate served at "+in.webhook.Address()+"\n",
			"ok: "+webhook+": the serving certificate expires at ",
			"ok: policies: every policy's pod selection reaches the webhook (1 policy, ",
			"ok: served policies: the server serves policy set ",
			"verdict: no errors\n")
	})

	t.Run("unserved and unreachable policies", func(t *testing.T) {
		out := install(t, 4, "--policy", filepath.Join(suite.root, "examples/policies/fleet"))
		contains(t, out,
			"error: policy sandbox-fleet match.any[2]: the pods it selects (labels agents.x-k8s.io/sandbox-name-hash=x) are never sent to the webhook: "+webhook+": its objectSelector (app=sandbox) does not select them\n",
			"  fix: set webhook.objectSelector and webhook.namespaceSelector so that they select these pods too",
			"error: served policies: the server serves policy set ",
			"verdict: errors found\n")
		if strings.Contains(out, "match.any[0]") {
			t.Errorf("match.any[0] (app=sandbox) is reachable, but reported:\n%s", out)
		}
	})

	t.Run("status URL", func(t *testing.T) {
		memory := filepath.Join(suite.root, "examples/policies/memory")
		r, err := harness.RunCommand(t.Context(), suite.cli, "check", "install", "--kubeconfig", kubeconfig, "--configuration", in.mwc.Name,
			"--status-url", fmt.Sprintf("127.0.0.1:%d/status", in.webhook.HealthPort), "--policy", memory)
		if err != nil {
			t.Fatal(err)
		}
		if want := "--status-url must be an http:// or https:// URL"; r.ExitCode != 2 || !strings.Contains(string(r.Stderr), want) {
			t.Errorf("schemeless --status-url: exit code %d, want 2 and %q:\n%s", r.ExitCode, want, r.Stderr)
		}
		out := install(t, 4, "--policy", memory, "--status-url", fmt.Sprintf("http://127.0.0.1:%d/no-such-page", in.webhook.HealthPort))
		contains(t, out, fmt.Sprintf("error: served policies: reading http://127.0.0.1:%d/no-such-page: HTTP 404 Not Found\n", in.webhook.HealthPort))
	})

	// Without --policy or --release-namespace, a url webhook names no release:
	// check install, as check pod, says so as a usage error.
	t.Run("which release", func(t *testing.T) {
		for _, args := range [][]string{{"install"}, {"-f", filepath.Join(suite.root, "examples/pods/sandbox.yaml")}} {
			r, err := harness.RunCommand(t.Context(), suite.cli, append(append([]string{"check"}, args...), "--kubeconfig", kubeconfig, "--configuration", in.mwc.Name)...)
			if err != nil {
				t.Fatal(err)
			}
			if want := "cannot tell which release's policies to read"; r.ExitCode != 2 || !strings.Contains(string(r.Stderr), want) {
				t.Errorf("check %s: exit code %d, want 2 and %q:\n%s%s", args[0], r.ExitCode, want, r.Stdout, r.Stderr)
			}
		}
	})

	t.Run("broken caBundle", func(t *testing.T) {
		other, err := harness.NewCerts(t.Context(), suite.binary, filepath.Join(t.TempDir(), "other"), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		broken := in.mwc.DeepCopy()
		broken.Webhooks[0].ClientConfig.CABundle = other.Current().CA
		in.install(t, broken)
		defer in.install(t, in.mwc)
		out := install(t, 4, "--policy", filepath.Join(suite.root, "examples/policies/memory"))
		contains(t, out,
			"error: "+webhook+": the caBundle does not verify the certificate served at "+in.webhook.Address()+": x509: ",
			"  fix: set the caBundle to the CA that signed the serving certificate",
			"verdict: errors found\n")
	})
}
