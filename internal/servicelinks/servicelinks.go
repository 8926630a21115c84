// Package servicelinks serves the Services of the containers' service
// links (the environment variables of package env: FOO_SERVICE_HOST, ...)
// from an informer on the API server's Services, as the kubelet's service
// lister: every namespace, headless Services left out by a field
// selector (they give no variables).
//
// # Usage
//
//	links := servicelinks.New(client, apiSource.Pods) // env.Services
//	envOptions.Services = links
//	group.Add("services", links)
//
// A standalone agent has none: its pods get no service links, as with a
// kubelet without an API server. It is internal: nodekit's wiring builds
// it for an agent with a KubeClient; a hand-assembled agent gives
// env.Options.Services any env.Services.
//
// # Concurrency
//
// An Informer is safe for concurrent use; Run runs its informer.
package servicelinks

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

// Informer serves the Services of the containers' service links
// (env.Services). It lives as long as the agent; Run runs the informer.
type Informer struct {
	informer cache.SharedIndexInformer
	lister   corelisters.ServiceLister
	// podsListed reports whether the API source has listed the pods;
	// nil means it has.
	podsListed func() bool
}

var _ env.Services = (*Informer)(nil)

// New builds the informer. podsListed, when not nil, reports whether the
// API source has listed the pods (see HasSynced). It does no I/O and
// starts no goroutine.
func New(client kubeclient.Interface, podsListed func() bool) *Informer {
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
	return &Informer{informer: inf, lister: corelisters.NewServiceLister(inf.GetIndexer()), podsListed: podsListed}
}

// List returns the Services of the namespace as last read.
func (s *Informer) List(namespace string) ([]*v1.Service, error) {
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
func (s *Informer) HasSynced() bool {
	return s.informer.HasSynced() || (s.podsListed != nil && !s.podsListed())
}

// Run lists and watches the Services until ctx ends, and returns once the
// informer's goroutines have exited.
func (s *Informer) Run(ctx context.Context) error {
	s.informer.RunWithContext(ctx)
	return nil
}
