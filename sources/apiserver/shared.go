package apiserver

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/kubeclient"
)

// SharedPods is one watch of the pods bound to any node (spec.nodeName
// set), shared by the Sources of the agents of one process (hollow nodes)
// in place of one watch per Source: give it to each Source
// (Options.Shared) and run it (Run) for as long as they run. Each Source
// sees its node's pods as through a watch of its own: the pods bound to
// its node, a first snapshot once the shared watch listed, and the same
// back-off while it lists again. It holds the pods of every node of the
// cluster, not only the process's.
type SharedPods struct {
	client           kubeclient.Interface
	log              logr.Logger
	maxRetryInterval time.Duration

	mu     sync.Mutex
	views  map[string]*notifyingStore // by node name
	listed bool
}

// NewSharedPods returns a SharedPods that watches through client. Of
// opts, it reads MaxRetryInterval (the back-off cap) and Logger. It does
// no I/O.
func NewSharedPods(client kubeclient.Interface, opts Options) (*SharedPods, error) {
	if client == nil {
		return nil, errors.New("apiserver: client is required")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &SharedPods{client: client, log: opts.Logger, maxRetryInterval: opts.MaxRetryInterval, views: map[string]*notifyingStore{}}, nil
}

// Run lists and watches the pods bound to any node until ctx ends, and
// returns after its reflector stopped.
func (p *SharedPods) Run(ctx context.Context) error {
	selector := fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	lw := kubeclient.ListWatcher(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = selector
			return p.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = selector
			return p.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, options)
		},
	}, p.client)
	log := p.log
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, sharedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), p: p}, cache.ReflectorOptions{
		Name:   "pods",
		Logger: &log,
		Backoff: &wait.Backoff{
			Duration: retryInterval,
			Factor:   2,
			Jitter:   retryJitter,
			Cap:      p.maxRetryInterval,
			Steps:    int(math.Ceil(float64(p.maxRetryInterval) / float64(retryInterval))),
		},
	})
	r.RunWithContext(logr.NewContext(ctx, p.log))
	return nil
}

// view returns the store of node's pods, made on first use (listed when
// the shared watch listed already).
func (p *SharedPods) view(node string) *notifyingStore {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.viewLocked(node)
}

func (p *SharedPods) viewLocked(node string) *notifyingStore {
	s, ok := p.views[node]
	if !ok {
		s = newNotifyingStore()
		if p.listed {
			_ = s.Replace(nil, "")
		}
		p.views[node] = s
	}
	return s
}

func nodeOf(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		return pod.Spec.NodeName
	}
	return ""
}

// sharedStore is the reflector's store: a store of every pod (which keeps
// the reflector's resource versions) that also routes each pod to the
// view of its node (a pod's spec.nodeName never changes once set).
type sharedStore struct {
	cache.Store
	p *SharedPods
}

var _ cache.Store = sharedStore{}

func (s sharedStore) Add(obj any) error {
	dropManagedFields(obj)
	return errors.Join(s.Store.Add(obj), s.p.view(nodeOf(obj)).Add(obj))
}

func (s sharedStore) Update(obj any) error {
	dropManagedFields(obj)
	shareUnchanged(s.Store, obj)
	return errors.Join(s.Store.Update(obj), s.p.view(nodeOf(obj)).update(obj))
}

func (s sharedStore) Delete(obj any) error {
	return errors.Join(s.Store.Delete(obj), s.p.view(nodeOf(obj)).Delete(obj))
}

// Replace replaces every view's pods with its node's of list, and marks
// every view listed.
func (s sharedStore) Replace(list []any, resourceVersion string) error {
	byNode := map[string][]any{}
	for _, obj := range list {
		dropManagedFields(obj)
		n := nodeOf(obj)
		byNode[n] = append(byNode[n], obj)
	}
	errs := []error{s.Store.Replace(list, resourceVersion)}
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listed = true
	for n := range byNode {
		p.viewLocked(n)
	}
	for n, v := range p.views {
		errs = append(errs, v.Replace(byNode[n], resourceVersion))
	}
	return errors.Join(errs...)
}
