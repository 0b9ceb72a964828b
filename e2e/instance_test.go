package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness"
	"github.com/sandbox-webhook/sandbox-webhook/e2e/harness/chart"
	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

const (
	// instanceLabel scopes a webhook configuration to its test's namespaces:
	// every instance's namespaceSelector requires instanceLabel=<its name>,
	// so tests never see each other's webhooks.
	instanceLabel = "e2e.sandbox-webhook.io/instance"
	// enforceLabel is the Pod Security admission level of a namespace.
	enforceLabel = "pod-security.kubernetes.io/enforce"
	// leakMitigationKey is the key of the chart's config ConfigMap read
	// through --leak-mitigation-file.
	leakMitigationKey = "leak-mitigation"
)

type instanceOptions struct {
	// policies are the policy files (name → content) of the mounted
	// policies directory; default: examples/policies/memory.
	policies map[string][]byte
	// leakMitigation is the content of the leak-mitigation file; default
	// "policy".
	leakMitigation string
	// namespaces are created, or relabelled, before the webhook starts so
	// that its namespace cache holds them from the start. Each also gets the
	// instance label.
	namespaces []*corev1.Namespace
	// objectSelector overrides the chart's webhook.objectSelector.
	objectSelector *metav1.LabelSelector
	// values are further chart values. webhook.guard is off unless they
	// turn it on: the suite checks the webhook's mutation against dry-run
	// and the exported policies, which never write a status on a pod no
	// policy changes; TestGuard runs the chart's default.
	values map[string]any
	// args are further serve flags.
	args []string
	// noProbe: do not wait for a probe pod to be mutated; the test waits
	// for its own sign that the webhook serves (a shadow policy mutates
	// nothing to wait for).
	noProbe bool
}

// instance is one sandbox-webhook process with its certificates, its
// ConfigMap-style policy and config directories, and the chart's
// MutatingWebhookConfiguration pointing the apiserver at it.
type instance struct {
	name string
	// ownNamespace is the webhook's release namespace (excluded).
	ownNamespace string
	// probeNamespace is a namespace of the instance for probes.
	probeNamespace string
	webhook        *harness.Webhook
	certs          *harness.Certs
	policies       *harness.Volume
	config         *harness.Volume
	mwc            *admissionregistrationv1.MutatingWebhookConfiguration
	logPath        string
}

// newInstance starts a webhook named name and waits until the apiserver
// sends it the pods of the instance's namespaces. Everything is torn down
// when the test ends: the configuration is deleted, then the process is
// stopped with SIGTERM, and a stop that is not clean fails the test.
func newInstance(t *testing.T, name string, o instanceOptions) *instance {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	in := &instance{name: name, ownNamespace: name + "-system", probeNamespace: name + "-probe"}

	ensureNamespace(t, in.ownNamespace, map[string]string{instanceLabel: name})
	// No Pod Security level: probes must be admitted whatever the policies
	// inject (a hostPath-only asset, say).
	ensureNamespace(t, in.probeNamespace, map[string]string{instanceLabel: name})
	for _, ns := range o.namespaces {
		labels := maps.Clone(ns.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[instanceLabel] = name
		ensureNamespace(t, ns.Name, labels)
	}

	var err error
	if o.policies == nil {
		if o.policies, err = harness.ReadDir(filepath.Join(suite.root, "examples/policies/memory")); err != nil {
			t.Fatal(err)
		}
	}
	if in.policies, err = harness.NewVolume(filepath.Join(dir, "policies"), o.policies); err != nil {
		t.Fatal(err)
	}
	if o.leakMitigation == "" {
		o.leakMitigation = "policy"
	}
	if in.config, err = harness.NewVolume(filepath.Join(dir, "config"), map[string][]byte{leakMitigationKey: []byte(o.leakMitigation)}); err != nil {
		t.Fatal(err)
	}
	if in.certs, err = harness.NewCerts(ctx, suite.binary, filepath.Join(dir, "tls"), "127.0.0.1"); err != nil {
		t.Fatal(err)
	}

	// The server runs as the chart's Deployment would: with --status-always
	// when the values turn the guard on.
	values := map[string]any{"webhook": map[string]any{"guard": map[string]any{"enabled": false}}}
	configOpts := chart.ConfigOptions{
		Release:           name,
		Namespace:         in.ownNamespace,
		URL:               "https://127.0.0.1/mutate-v1-pod", // the port is known once the server runs
		CABundle:          in.certs.Current().CA,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{instanceLabel: name}},
		ObjectSelector:    o.objectSelector,
		Values:            chart.MergeValues(values, o.values),
		KubeVersion:       suite.version,
	}
	adm, err := chart.RenderAdmission(ctx, suite.root, configOpts)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--shutdown-delay", "200ms"}, o.args...)
	if adm.StatusAlways {
		args = append(args, "--status-always")
	}

	in.logPath = filepath.Join(dir, "webhook.log")
	logFile := createLog(t, in.logPath)
	in.webhook, err = harness.StartWebhook(ctx, harness.WebhookOptions{
		Binary:             suite.binary,
		Kubeconfig:         suite.kubeconfig,
		CertDir:            in.certs.Dir(),
		Policies:           []string{in.policies.Dir},
		LeakMitigationFile: filepath.Join(in.config.Dir, leakMitigationKey),
		ExcludeNamespaces:  []string{in.ownNamespace},
		// Its configuration is deleted before it stops, so nothing needs
		// the default 5s of answering while not ready.
		Args: args,
		// The Go runtime's settings too: the memory tests measure the
		// server as the chart runs it.
		Env: adm.Env,
		Log: logFile,
	})
	if err != nil {
		t.Fatal(err) // the log is dumped by createLog's cleanup
	}
	t.Cleanup(func() {
		if err := in.webhook.Stop(); err != nil {
			t.Errorf("stopping the webhook: %v", err)
		}
	})

	configOpts.URL = in.webhook.URL()
	if adm, err = chart.RenderAdmission(ctx, suite.root, configOpts); err != nil {
		t.Fatal(err)
	}
	in.mwc = adm.Webhooks
	if adm.Guard != nil {
		installGuard(t, adm)
	}
	in.install(t, in.mwc)
	t.Cleanup(func() {
		err := suite.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), in.mwc.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the webhook configuration: %v", err)
		}
	})
	if o.noProbe {
		return in
	}
	if err := harness.WaitMutating(ctx, suite.cs, testkit.SandboxPod(in.probeNamespace, "probe", sleeping), true); err != nil {
		t.Fatal(err)
	}
	return in
}

// installGuard creates the chart's guard (webhook.guard) and deletes it when
// the test ends.
func installGuard(t *testing.T, adm *chart.Admission) {
	t.Helper()
	remove, err := chart.InstallGuard(t.Context(), suite.cs, adm)
	t.Cleanup(func() { remove(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
}

// install creates or replaces the instance's webhook configuration.
func (in *instance) install(t *testing.T, mwc *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	if err := chart.InstallWebhookConfiguration(t.Context(), suite.cs, mwc); err != nil {
		t.Fatal(err)
	}
}

// ensureNamespace creates the namespace with labels, or adds labels to it.
func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	api := suite.cs.CoreV1().Namespaces()
	_, err := api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var ns *corev1.Namespace
		if ns, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			maps.Copy(ns.Labels, labels)
			_, err = api.Update(ctx, ns, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
}

// dumpLog logs the webhook's last lines (JSON logs: decisions and errors,
// never pod contents).
// createLog creates the log file of a process the test starts; when the test
// has failed, the file's end is dumped as it is closed.
func createLog(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			dumpLog(t, path)
		}
	})
	return f
}

func dumpLog(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("webhook log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("webhook log (%s), last %d lines:\n%s", path, len(lines), strings.Join(lines, "\n"))
}

// sleeping is the e2e suite's container: a Python image that sleeps, as
// a sandbox's would. The pods never run (the suite has no kubelet).
var sleeping = testkit.Image("python:3.12-slim", "sleep", "infinity")

// plainPod is a pod that is not a sandbox.
func plainPod(ns, name string) *corev1.Pod {
	pod := testkit.SandboxPod(ns, name, sleeping)
	pod.Labels = nil
	return pod
}

// createPod creates pod and returns it as stored.
func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := suite.cs.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, podName(pod), err)
	}
	return got
}

func podName(pod *corev1.Pod) string {
	if pod.Name == "" {
		return pod.GenerateName + "*"
	}
	return pod.Name
}

// fmtPod names a pod for messages.
func fmtPod(pod *corev1.Pod) string { return fmt.Sprintf("%s/%s", pod.Namespace, podName(pod)) }
