package nodekit

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
	"github.com/nodekit/nodekit/podruntime"
)

// RuntimeClassGetter returns a RuntimeClass by name, or an error that
// matches apierrors.IsNotFound for a class that does not exist. A
// client-go RuntimeClassLister (k8s.io/client-go/listers/node/v1) is one.
type RuntimeClassGetter interface {
	Get(name string) (*nodev1.RuntimeClass, error)
}

// RuntimeClassGetterFunc is a RuntimeClassGetter made of a function.
type RuntimeClassGetterFunc func(name string) (*nodev1.RuntimeClass, error)

// Get calls f.
func (f RuntimeClassGetterFunc) Get(name string) (*nodev1.RuntimeClass, error) { return f(name) }

var _ RuntimeClassGetter = RuntimeClassGetterFunc(nil)

// runtimeClassSyncWait bounds how long a look-up waits for the informer's
// first list: after it, a pod with a RuntimeClass is admitted and its
// sandbox retried until the list arrives.
const runtimeClassSyncWait = 30 * time.Second

// runtimeClasses are the RuntimeClasses the agent resolves pods' handlers
// with (Options.RuntimeClasses, or an informer on the API server's).
type runtimeClasses struct {
	getter   RuntimeClassGetter
	informer cache.SharedIndexInformer // nil unless the agent runs one
	synced   chan struct{}             // closed once the informer listed, or stopped
}

// setUpRuntimeClasses chooses the agent's RuntimeClasses and gives the
// runtime manager the pods' handlers: Options.RuntimeClasses when set,
// else, for an agent joined to a cluster, an informer on the API server's
// RuntimeClasses (run by Run), else none (runtimeClassName is ignored, as
// by a kubelet without an API client).
func (a *Agent) setUpRuntimeClasses(o *podruntime.Options) {
	rc := &a.runtimeClasses
	switch {
	case a.opts.RuntimeClasses != nil:
		rc.getter = a.opts.RuntimeClasses
	case a.opts.KubeClient != nil:
		rc.informer = newRuntimeClassInformer(a.opts.KubeClient)
		rc.getter = nodelisters.NewRuntimeClassLister(rc.informer.GetIndexer())
		rc.synced = make(chan struct{})
	default:
		return
	}
	if o.PodRuntimeHandler == nil {
		o.PodRuntimeHandler = func(pod *v1.Pod) (string, error) {
			return rc.handler(*pod.Spec.RuntimeClassName)
		}
	}
}

// handler returns the handler of the named RuntimeClass, waiting (up to
// runtimeClassSyncWait) for the informer's first list.
func (rc *runtimeClasses) handler(name string) (string, error) {
	if rc.synced != nil {
		t := time.NewTimer(runtimeClassSyncWait)
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

// admission is the RuntimeClass admission check: a pod naming a
// RuntimeClass that does not exist is rejected (reason RuntimeClass).
func (rc *runtimeClasses) admission() admission.Handler {
	if rc.getter == nil {
		return admission.RuntimeClass(admission.RuntimeClassOptions{})
	}
	return admission.RuntimeClass(admission.RuntimeClassOptions{Lookup: rc.handler})
}

// runRuntimeClasses runs the RuntimeClass informer, if any, until the
// agent stops.
func (a *Agent) runRuntimeClasses(run func(string, func(context.Context) error)) {
	rc := &a.runtimeClasses
	if rc.informer == nil {
		return
	}
	run("runtime classes", func(ctx context.Context) error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			cache.WaitForCacheSync(ctx.Done(), rc.informer.HasSynced)
			close(rc.synced)
		}()
		rc.informer.RunWithContext(ctx)
		<-done
		return nil
	})
}

// newRuntimeClassInformer is client-go's NewRuntimeClassInformer (no
// resync, no indexer) over kubeclient.
func newRuntimeClassInformer(client kubeclient.Interface) cache.SharedIndexInformer {
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
