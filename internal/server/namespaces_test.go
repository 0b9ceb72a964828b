package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandbox-webhook/sandbox-webhook/internal/testkit"
)

func TestNamespaceCache(t *testing.T) {
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "team-a",
		Labels:      map[string]string{"pod-security.kubernetes.io/enforce": "baseline"},
		Annotations: map[string]string{"big": strings.Repeat("x", 1000)},
	}})
	c := newNamespaceCache(client)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testkit.WaitFor(t, "sync", time.Minute, testkit.Holds(func() bool { return c.synced() == nil }))

	ns, ok := c.Lookup(context.Background(), "team-a")
	if !ok || ns.Name != "team-a" || ns.Labels["pod-security.kubernetes.io/enforce"] != "baseline" {
		t.Errorf("team-a = %+v %v", ns, ok)
	}
	if obj, _ := c.lister.Get("team-a"); len(obj.Annotations) != 0 {
		t.Error("the cache keeps annotations it never reads")
	}

	// A namespace created while an admission waits for it is found.
	found := make(chan bool)
	go func() {
		_, ok := c.Lookup(context.Background(), "just-created")
		found <- ok
	}()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "just-created"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !<-found {
		t.Error("a namespace created during the lookup was not found")
	}

	// Label changes reach the cache.
	if _, err := client.CoreV1().Namespaces().Update(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-a", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"},
	}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the new labels", time.Minute, testkit.Holds(func() bool {
		ns, _ := c.Lookup(context.Background(), "team-a")
		return ns.Labels["pod-security.kubernetes.io/enforce"] == "privileged"
	}))

	// A namespace that does not exist is not found once the caller gives up.
	gone, stop := context.WithCancel(context.Background())
	stop()
	if _, ok := c.Lookup(gone, "never"); ok {
		t.Error("found a namespace that does not exist")
	}
}

// TestNotReadyUntilNamespacesSync holds the namespace list: the server is
// not ready and answers admissions with 503 until it returns.
func TestNotReadyUntilNamespacesSync(t *testing.T) {
	release := make(chan struct{})
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sandboxes"}})
	client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	e := newTestEnv(t, func(o *Options) { o.KubeClient = client })
	e.start(nil)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	testkit.WaitFor(t, "/status", time.Minute, testkit.Holds(func() bool { code, _ := e.get(e.healthURL + "/status"); return code == http.StatusOK }))
	st := e.status()
	if st.Ready || st.Checks[checkNamespaceCache] == "ok" || st.Checks[checkPolicies] != "ok" {
		t.Errorf("checks before the namespace list returned: %v", st.Checks)
	}
	res, err := e.admit(e.client, reviewFor(t, "x", "sandboxes", sandboxPodJSON))
	if err != nil || res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "namespace cache has not synced") {
		t.Errorf("admission before the sync: %v HTTP %d %q", err, res.status, res.body)
	}

	close(release)
	e.waitReady()
	if m := e.marker(e.client); m != "a" {
		t.Errorf("MARKER = %q", m)
	}
}
