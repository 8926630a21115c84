package hollow

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/internal/servicelinks"
	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/sources/apiserver"
)

// shared holds what the nodes of one Start share where a kubelet would
// not need its own: one watch per resource (pods, Nodes, Services,
// RuntimeClasses) for the process instead of one per node, one event
// broadcaster and scheme, and one periodic.Driver that starts the nodes'
// periodic work (nodekit.Options.Periodic): status passes, Lease
// renewals, container collections, volume passes, resize retries.
type shared struct {
	events   *events.Broadcaster
	periodic *periodic.Driver
	pods     *apiserver.SharedPods
	nodes    cache.SharedIndexInformer
	classes  cache.SharedIndexInformer
	services *servicelinks.Informer

	wg sync.WaitGroup
}

// nodeListWatcher is what kubeclient's node client does beside
// kubeclient.NodeInterface.
type nodeListWatcher interface {
	List(context.Context, metav1.ListOptions) (*v1.NodeList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func newShared(client kubeclient.Interface, log logr.Logger) (*shared, error) {
	nodes, ok := client.CoreV1().Nodes().(nodeListWatcher)
	if !ok {
		return nil, fmt.Errorf("hollow: the client cannot list and watch Nodes")
	}
	pods, err := apiserver.NewSharedPods(client, apiserver.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("hollow: %w", err)
	}
	informer := func(lw *cache.ListWatch, obj apiruntime.Object) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformerWithOptions(kubeclient.ListWatcher(lw, client), obj, cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}})
	}
	return &shared{
		events:   events.NewBroadcaster(client, log),
		periodic: periodic.NewDriver(),
		pods:     pods,
		nodes: informer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (apiruntime.Object, error) {
				return nodes.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return nodes.Watch(ctx, o)
			},
		}, &v1.Node{}),
		classes: informer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (apiruntime.Object, error) {
				return client.NodeV1().RuntimeClasses().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.NodeV1().RuntimeClasses().Watch(ctx, o)
			},
		}, &nodev1.RuntimeClass{}),
		services: servicelinks.New(client, nil),
	}, nil
}

// start runs the shared parts until ctx ends and waits for the informers'
// first lists until wait ends.
func (s *shared) start(ctx, wait context.Context) error {
	s.wg.Go(func() { _ = s.events.Run(ctx) })
	s.wg.Go(func() { _ = s.periodic.Run(ctx) })
	s.wg.Go(func() { _ = s.pods.Run(ctx) })
	s.wg.Go(func() { s.nodes.RunWithContext(ctx) })
	s.wg.Go(func() { s.classes.RunWithContext(ctx) })
	s.wg.Go(func() { _ = s.services.Run(ctx) })
	if !cache.WaitForCacheSync(wait.Done(), s.nodes.HasSynced, s.classes.HasSynced, s.services.HasSynced) {
		return fmt.Errorf("hollow: the shared informers did not list: %w", context.Cause(wait))
	}
	return nil
}

// configure makes the agent of node name use the shared parts.
func (s *shared) configure(name string, o *nodekit.Options) {
	o.Events = s.events.Recorder(name)
	o.APISource.Shared = s.pods
	o.Node.Nodes = corelisters.NewNodeLister(s.nodes.GetIndexer())
	o.Periodic = s.periodic
	o.RuntimeClasses = nodelisters.NewRuntimeClassLister(s.classes.GetIndexer())
	o.Services = s.services
}

// wait waits for the shared parts to return, once their context ended.
func (s *shared) wait() { s.wg.Wait() }
