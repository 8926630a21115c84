package nodekit

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/env"
	"github.com/nodekit/nodekit/kubeclient"
)

// serviceLinks serves the Services of the containers' service links
// (env.Services) from an informer on the API server's Services, as the
// kubelet's service lister: every namespace, headless Services left out
// by a field selector (they give no variables). It lives as long as the
// agent; Run runs the informer.
type serviceLinks struct {
	informer cache.SharedIndexInformer
	lister   corelisters.ServiceLister
	// podsListed reports whether the API source has listed the pods;
	// nil means it has.
	podsListed func() bool
}

var _ env.Services = (*serviceLinks)(nil)

// newServiceLinks builds the informer. It does no I/O and starts no
// goroutine.
func newServiceLinks(client kubeclient.Interface) *serviceLinks {
	// client-go's NewFilteredServiceInformer, over kubeclient.
	selector := fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	inf := cache.NewSharedIndexInformerWithOptions(
		kubeclient.ListWatcher(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (apiruntime.Object, error) {
				opts.FieldSelector = selector
				return client.CoreV1().Services(metav1.NamespaceAll).List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return client.CoreV1().Services(metav1.NamespaceAll).Watch(ctx, opts)
			},
		}, client),
		&v1.Service{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}},
	)
	return &serviceLinks{informer: inf, lister: corelisters.NewServiceLister(inf.GetIndexer())}
}

// List returns the Services of the namespace as last read.
func (s *serviceLinks) List(namespace string) ([]*v1.Service, error) {
	return s.lister.Services(namespace).List(labels.Everything())
}

// HasSynced reports whether the Services were listed once, or whether the
// API source runs the pods of its offline checkpoint (it has not listed the
// pods: the API server is unreachable since the agent started). The kubelet
// waits for the Services before it starts an API pod's container, so that
// a container started at the kubelet's start does not miss
// KUBERNETES_SERVICE_HOST; nodekit keeps the pods of its checkpoint running
// while the API server is away, and a container restarted then gets the
// Services read so far (none), as a static pod does.
func (s *serviceLinks) HasSynced() bool {
	return s.informer.HasSynced() || (s.podsListed != nil && !s.podsListed())
}

// Run lists and watches the Services until ctx ends, and returns once the
// informer's goroutines have exited.
func (s *serviceLinks) Run(ctx context.Context) error {
	s.informer.RunWithContext(ctx)
	return nil
}

// setUpServiceLinks makes the Services informer of an agent joined to a
// cluster (KubeClient); a standalone agent has none, and its pods get no
// service links, as a kubelet without an API server.
func (a *Agent) setUpServiceLinks() {
	if a.opts.KubeClient != nil {
		a.links = newServiceLinks(a.opts.KubeClient)
		if a.api != nil {
			a.links.podsListed = func() bool { _, listed := a.api.Pods(); return listed }
		}
	}
}

// serviceLinkServices is what the environment resolver lists Services
// from: nil without a cluster.
func (a *Agent) serviceLinkServices() env.Services {
	if a.links == nil {
		return nil
	}
	return a.links
}

// runServiceLinks runs the Services informer, if any, with the agent.
func (a *Agent) runServiceLinks(run func(string, func(context.Context) error)) {
	if a.links != nil {
		run("services", a.links.Run)
	}
}
