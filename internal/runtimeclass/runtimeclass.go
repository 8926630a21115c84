// Package runtimeclass resolves pods' RuntimeClasses, as the kubelet's
// runtimeclass manager: the handler a pod's sandbox runs with
// (spec.runtimeClassName), and the admission check that rejects a pod
// whose class does not exist (reason RuntimeClass). The classes come from
// a Getter of the user's, or from an informer on the API server's
// RuntimeClasses (NewInformer), run with the agent.
//
// # Usage
//
//	rc := runtimeclass.NewInformer(client) // or runtimeclass.New(getter)
//	podRuntimeOptions.PodRuntimeHandler = rc.PodHandler
//	admit = append(admit, rc.Admission(runtimeHandlers))
//	group.Add("runtime classes", rc) // an informer's only
//
// It is internal: an agent builds it from nodekit.Options.RuntimeClasses
// (a Getter, aliased there as RuntimeClassGetter) or its KubeClient; a
// hand-assembled agent sets podruntime.Options.PodRuntimeHandler and
// admission.RuntimeClass itself.
//
// # Concurrency
//
// A Resolver is safe for concurrent use.
package runtimeclass

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/kubeclient"
)

// Getter returns a RuntimeClass by name, or an error that
// matches apierrors.IsNotFound for a class that does not exist. A
// client-go RuntimeClassLister (k8s.io/client-go/listers/node/v1) is one.
type Getter interface {
	Get(name string) (*nodev1.RuntimeClass, error)
}

// GetterFunc is a Getter made of a function.
type GetterFunc func(name string) (*nodev1.RuntimeClass, error)

// Get calls f.
func (f GetterFunc) Get(name string) (*nodev1.RuntimeClass, error) { return f(name) }

var _ Getter = GetterFunc(nil)

// syncWait bounds how long a look-up waits for the informer's
// first list: after it, a pod with a RuntimeClass is admitted and its
// sandbox retried until the list arrives.
const syncWait = 30 * time.Second

// Resolver resolves pods' RuntimeClasses through a Getter. The zero
// value, or a nil *Resolver, resolves none: runtimeClassName is ignored,
// as by a kubelet without an API client.
type Resolver struct {
	getter   Getter
	informer cache.SharedIndexInformer // nil unless it runs one
	synced   chan struct{}             // closed once the informer listed, or stopped
}

// New returns a Resolver over g.
func New(g Getter) *Resolver { return &Resolver{getter: g} }

// NewInformer returns a Resolver over an informer on the API server's
// RuntimeClasses, which its Run runs. It does no I/O.
func NewInformer(client kubeclient.Interface) *Resolver {
	inf := newInformer(client)
	return &Resolver{informer: inf, getter: nodelisters.NewRuntimeClassLister(inf.GetIndexer()), synced: make(chan struct{})}
}

// PodHandler returns the handler of the pod's RuntimeClass
// (podruntime.Options.PodRuntimeHandler), waiting (up to 30s) for
// the informer's first list.
func (rc *Resolver) PodHandler(pod *v1.Pod) (string, error) {
	return rc.handler(*pod.Spec.RuntimeClassName)
}

// handler returns the handler of the named RuntimeClass, waiting (up to
// syncWait) for the informer's first list.
func (rc *Resolver) handler(name string) (string, error) {
	if rc.synced != nil {
		t := time.NewTimer(syncWait)
		defer t.Stop()
		select {
		case <-rc.synced:
		case <-t.C:
		}
		if !rc.informer.HasSynced() {
			return "", fmt.Errorf("failed to lookup RuntimeClass %s: RuntimeClasses not listed from the API server yet", name)
		}
	}
	c, err := rc.getter.Get(name)
	if err != nil {
		return "", err
	}
	return c.Handler, nil
}

// Admission is the RuntimeClass admission check: a pod naming a
// RuntimeClass that does not exist is rejected (reason RuntimeClass), and
// so is one whose class names a handler that handlers (the runtime's, from
// its CRI Status) does not list; handlers nil, or returning none (not
// known yet, or a runtime that lists none, as containerd 1.6), accepts
// every handler.
func (rc *Resolver) Admission(handlers func() []string) admission.Handler {
	if rc == nil || rc.getter == nil {
		return admission.RuntimeClass(admission.RuntimeClassOptions{})
	}
	return admission.RuntimeClass(admission.RuntimeClassOptions{Lookup: rc.handler, Handlers: handlers})
}

// Run runs the informer, if any, until ctx ends; without one it returns
// at once.
func (rc *Resolver) Run(ctx context.Context) error {
	if rc.informer == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cache.WaitForCacheSync(ctx.Done(), rc.informer.HasSynced)
		close(rc.synced)
	}()
	rc.informer.RunWithContext(ctx)
	<-done
	return nil
}

// newInformer is client-go's NewRuntimeClassInformer (no
// resync, no indexer) over kubeclient.
func newInformer(client kubeclient.Interface) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(
		kubeclient.ListWatcher(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (apiruntime.Object, error) {
				return client.NodeV1().RuntimeClasses().List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return client.NodeV1().RuntimeClasses().Watch(ctx, opts)
			},
		}, client),
		&nodev1.RuntimeClass{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}},
	)
}
