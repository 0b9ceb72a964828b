package server

import (
	"context"
	"errors"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sandbox-webhook/sandbox-webhook/mutate"
)

const (
	// namespaceWait bounds how long an admission waits for a namespace
	// that is not in the cache yet: one created a moment before the pod,
	// whose watch event is still on its way.
	namespaceWait = 2 * time.Second
	// namespacePoll is how often the cache is looked at while waiting.
	namespacePoll = 20 * time.Millisecond
)

// namespaceCache holds the namespaces' names and labels, fed by a watch
// (RBAC: list and watch namespaces). Admission reads only the cache.
type namespaceCache struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corelisters.NamespaceLister
}

func newNamespaceCache(client kubernetes.Interface) *namespaceCache {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripNamespace))
	nsInformer := factory.Core().V1().Namespaces()
	return &namespaceCache{
		factory:  factory,
		informer: nsInformer.Informer(),
		lister:   nsInformer.Lister(),
	}
}

// stripNamespace keeps only what admission reads: name and labels.
func stripNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:            ns.Name,
		UID:             ns.UID,
		ResourceVersion: ns.ResourceVersion,
		Labels:          ns.Labels,
	}}, nil
}

// run starts the watch and stops it when ctx ends.
func (c *namespaceCache) run(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	<-ctx.Done()
	c.factory.Shutdown()
	return nil
}

// synced is the readiness check of the cache.
func (c *namespaceCache) synced() error {
	if !c.informer.HasSynced() {
		return errors.New("the namespace cache has not synced yet")
	}
	return nil
}

// Lookup implements admission.NamespaceLookup.
func (c *namespaceCache) Lookup(ctx context.Context, name string) (mutate.Namespace, bool) {
	if ns, ok := c.get(name); ok {
		return ns, true
	}
	var ns mutate.Namespace
	var ok bool
	_ = wait.PollUntilContextTimeout(ctx, namespacePoll, namespaceWait, false, func(context.Context) (bool, error) {
		ns, ok = c.get(name)
		return ok, nil
	})
	return ns, ok
}

func (c *namespaceCache) get(name string) (mutate.Namespace, bool) {
	ns, err := c.lister.Get(name)
	if err != nil {
		return mutate.Namespace{}, false
	}
	return mutate.Namespace{Name: ns.Name, Labels: maps.Clone(ns.Labels)}, true
}
