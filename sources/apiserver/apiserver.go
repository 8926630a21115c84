package apiserver

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
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
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/sources"
)

const (
	// DefaultMinInterval is the shortest time between two snapshots.
	DefaultMinInterval = 100 * time.Millisecond
	// DefaultMaxRetryInterval caps the back-off between failed lists and
	// watches of the node's pods: after an API server outage the source
	// lists again within 3 s of its return (client-go's informers cap it
	// at 30 s, each wait stretched by up to 2x: up to a minute blind).
	DefaultMaxRetryInterval = 2 * time.Second

	// DefaultCheckpointGrace is how long Run waits for its first list
	// before it sends the checkpoint's pods.
	DefaultCheckpointGrace = 3 * time.Second

	// retryInterval is the first back-off, client-go's.
	retryInterval = 800 * time.Millisecond
	// retryJitter stretches each wait by a random factor of up to
	// 1+retryJitter, so that many agents do not retry in step.
	retryJitter = 0.5
)

// Options configures a Source.
type Options struct {
	// MinInterval is the shortest time between two snapshots: changes that
	// arrive meanwhile are sent together in the next one. The first snapshot
	// is sent as soon as the first list completes. Defaults to 100ms.
	MinInterval time.Duration
	// MaxRetryInterval caps the back-off between failed lists and watches:
	// it starts at 0.8s and doubles, each wait stretched by a random factor
	// of up to 1.5 so that many agents do not retry in step. After an API
	// server outage the source lists again within 1.5 times this of its
	// return. A failed attempt costs the API server a refused connection
	// or an error reply; raise it for fleets where thousands of agents
	// retrying every few seconds matter more than seeing pods again
	// within seconds. Defaults to 2s (client-go's informers: 30s); at
	// least 0.8s.
	MaxRetryInterval time.Duration
	// CheckpointPath is a file where the source keeps the pods of its last
	// snapshot, written before the snapshot is sent, so that an agent
	// restarted while the API server is unreachable runs the pods the
	// server last gave it: when the first list has not completed within
	// CheckpointGrace, Run sends the checkpoint's pods as its first
	// snapshot, and reconciles when the list arrives. Defaults to none (no
	// checkpoint; the nodekit agent sets <RootDir>/checkpoints/apiserver-pods.json).
	CheckpointPath string
	// NoCheckpoint keeps no checkpoint, whatever CheckpointPath says: the
	// nodekit agent then sets none. For agents that never restart on
	// their state (hollow nodes, whose directory goes with them), where
	// each snapshot's write would be work for nothing.
	NoCheckpoint bool
	// CheckpointGrace is how long Run waits for its first list before it
	// sends the checkpoint's pods. Defaults to 3s.
	CheckpointGrace time.Duration
	// Periodic, with Shared and no checkpoint, runs Start's deliveries as
	// a task of the Driver, which the agents of one process can share
	// (hollow nodes do): the Source then holds no goroutine. Defaults to
	// nil: Start runs Run's loop on a goroutine of its own.
	Periodic *periodic.Driver
	// Logger receives the source's logs, and the reflector's. Defaults to
	// discarding them.
	Logger logr.Logger
	// Shared, when set, is the watch of the pods of every node that the
	// sources of one process share (NewSharedPods, run by its owner): the
	// source reads its node's pods from it and watches none itself.
	// Defaults to nil: a watch of the node's pods of the source's own.
	Shared *SharedPods
}

func (o *Options) setDefaults() error {
	if o.MinInterval < 0 || o.MaxRetryInterval < 0 || o.CheckpointGrace < 0 {
		return errors.New("apiserver: negative MinInterval, MaxRetryInterval or CheckpointGrace")
	}
	if o.CheckpointGrace == 0 {
		o.CheckpointGrace = DefaultCheckpointGrace
	}
	if o.MinInterval == 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MaxRetryInterval == 0 {
		o.MaxRetryInterval = DefaultMaxRetryInterval
	}
	o.MaxRetryInterval = max(o.MaxRetryInterval, retryInterval)
	o.Logger = o.Logger.WithName("apiserver")
	return nil
}

// Source watches the API server for the pods bound to one node and sends
// them as full snapshots. It is a sources.Source; build it with New. Run
// may be called again after it returned (it lists afresh). Pods reads the
// pods the watch holds, for example for mirror.Options.Pods.
type Source struct {
	client   kubeclient.Interface
	nodeName string
	opts     Options
	log      logr.Logger

	// store is the reflector's store while Run runs, nil otherwise.
	store atomic.Pointer[notifyingStore]
}

var (
	_ sources.Pusher       = (*Source)(nil)
	_ sources.ReadOnlyPods = (*Source)(nil)
)

// PodsReadOnly implements sources.ReadOnlyPods: the pods of the snapshots
// are the watch's decoded objects (or the checkpoint's), which a change
// replaces and nothing modifies, so the merge need not copy them deeply.
func (s *Source) PodsReadOnly() bool { return true }

// New returns a Source for the pods bound to the node nodeName
// (spec.nodeName), read through client. It does no I/O.
func New(client kubeclient.Interface, nodeName string, opts Options) (*Source, error) {
	if client == nil {
		return nil, errors.New("apiserver: client is required")
	}
	if nodeName == "" {
		return nil, errors.New("apiserver: the node name is required")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	return &Source{client: client, nodeName: nodeName, opts: opts, log: opts.Logger.WithValues("node", nodeName)}, nil
}

// Run lists and watches the node's pods and sends the complete set after
// the first list and after every change, at most once per MinInterval. It
// blocks until ctx ends, returns nil then, and returns after the reflector
// stopped.
func (s *Source) Run(ctx context.Context, snapshots chan<- []*v1.Pod) error {
	return s.run(ctx, func(snap []*v1.Pod) bool {
		select {
		case snapshots <- snap:
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// Start is Run pushing its snapshots (sources.Pusher). With Options.Shared
// and Options.Periodic, and no checkpoint, a task of the Driver that each
// change of the node's pods makes due pushes them, and the Source holds no
// goroutine; else a goroutine of its own runs Run's loop.
func (s *Source) Start(ctx context.Context, push func(ctx context.Context, pods []*v1.Pod)) (wait func(), err error) {
	if d := s.opts.Periodic; d != nil && s.opts.Shared != nil && (s.opts.CheckpointPath == "" || s.opts.NoCheckpoint) {
		return s.startTask(ctx, d, push), nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.run(ctx, func(snap []*v1.Pod) bool {
			push(ctx, snap)
			return ctx.Err() == nil
		})
	}()
	return func() { <-done }, nil
}

// startTask pushes the node's pods from the shared watch on a task of d:
// at once when listed, then after each change, at most once per
// MinInterval.
func (s *Source) startTask(ctx context.Context, d *periodic.Driver, push func(context.Context, []*v1.Pod)) (wait func()) {
	store := s.opts.Shared.view(s.nodeName)
	s.store.Store(store)
	// next is when a push may come (MinInterval after the last); the
	// task is due then at a change, else idle.
	var next atomic.Int64
	var task atomic.Pointer[periodic.Task]
	store.setOnChange(func() {
		if t := task.Load(); t != nil {
			t.Reset(time.Until(time.Unix(0, next.Load())))
		}
	})
	t := d.Start(ctx, 0, func(ctx context.Context) time.Duration {
		snap, ok := store.snapshot()
		if !ok {
			return periodic.Idle // not listed yet: the list is a change
		}
		s.log.V(4).Info("sending snapshot", "pods", len(snap))
		push(ctx, snap)
		next.Store(time.Now().Add(s.opts.MinInterval).UnixNano())
		return periodic.Idle
	})
	task.Store(t)
	return func() {
		t.Wait()
		store.setOnChange(nil)
		s.store.CompareAndSwap(store, nil)
	}
}

// run is Run's loop; send sends a snapshot and reports whether ctx is
// still alive.
func (s *Source) run(ctx context.Context, send func([]*v1.Pod) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	away := &outage{log: s.log}
	store := newNotifyingStore()
	if s.opts.Shared != nil {
		store = s.opts.Shared.view(s.nodeName)
		store.notify() // a first snapshot when it listed already
	} else {
		store.onReplace = away.over
	}
	s.store.Store(store)
	defer s.store.CompareAndSwap(store, nil)
	selector := fields.OneTermEqualSelector("spec.nodeName", s.nodeName).String()
	lw := kubeclient.ListWatcher(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = selector
			list, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, options)
			away.failed(ctx, err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = selector
			w, err := s.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, options)
			away.failed(ctx, err)
			return w, err
		},
	}, s.client)
	log := s.log
	r := cache.NewReflectorWithOptions(lw, &v1.Pod{}, store, cache.ReflectorOptions{
		Name:   "pods",
		Logger: &log,
		Backoff: &wait.Backoff{
			Duration: retryInterval,
			Factor:   2,
			Jitter:   retryJitter,
			Cap:      s.opts.MaxRetryInterval,
			Steps:    int(math.Ceil(float64(s.opts.MaxRetryInterval) / float64(retryInterval))),
		},
	})

	var cp *checkpoint
	var fromCheckpoint []*v1.Pod
	var grace <-chan time.Time
	if s.opts.CheckpointPath != "" && !s.opts.NoCheckpoint {
		cp = &checkpoint{path: s.opts.CheckpointPath, nodeName: s.nodeName}
		pods, ok, err := cp.load()
		switch {
		case err != nil:
			s.log.Error(err, "cannot use the checkpoint; waiting for the API server")
		case ok:
			fromCheckpoint = pods
			t := time.NewTimer(s.opts.CheckpointGrace)
			defer t.Stop()
			grace = t.C
		}
	}

	var wg sync.WaitGroup
	if s.opts.Shared == nil {
		wg.Go(func() { r.RunWithContext(logr.NewContext(ctx, s.log)) })
	}
	defer wg.Wait()
	defer cancel()

	usedCheckpoint := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-store.changed:
		case <-grace:
			grace = nil
			if _, listed := store.snapshot(); listed {
				continue
			}
			s.log.Info("API server not listed yet; running the pods of the local checkpoint until it is", "pods", len(fromCheckpoint), "checkpoint", cp.path)
			usedCheckpoint = true
			if !send(fromCheckpoint) {
				return nil
			}
			continue
		}
		snap, ok := store.snapshot()
		if !ok {
			continue // not listed yet
		}
		grace = nil
		if usedCheckpoint {
			s.log.Info("API server listed; reconciling the checkpoint's pods with it", "pods", len(snap))
			usedCheckpoint = false
		}
		if cp != nil {
			// Before the snapshot is acted on: a pod the agent runs is
			// always in the checkpoint.
			if err := cp.save(snap); err != nil {
				if err.Error() != cp.failed {
					s.log.Error(err, "cannot write the checkpoint; an agent restarted without the API server will wait for it")
					cp.failed = err.Error()
				}
			} else {
				cp.failed = ""
			}
		}
		s.log.V(4).Info("sending snapshot", "pods", len(snap))
		if !send(snap) {
			return nil
		}
		if !sleep(ctx, s.opts.MinInterval) {
			return nil
		}
	}
}

// Pods returns the pods bound to the node that the source's watch holds
// now, sorted by namespace and name, and whether the first list of the
// current Run completed. It returns nil and false before then and after Run
// returned. After the first list the pods follow the watch, which may lag
// behind the API server, and stand as they were while the source lists
// again after a failed watch.
//
// The pods are the source's own decoded objects, shared with its snapshots
// and with other callers, not copies: callers must not modify them. Pods
// copies pointers, never pods, and sends no request. It is safe to call
// concurrently with Run and with itself.
func (s *Source) Pods() (pods []*v1.Pod, synced bool) {
	store := s.store.Load()
	if store == nil {
		return nil, false
	}
	return store.snapshot()
}

// sleep waits for d and reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// outage logs one line when the lists and watches of the node's pods
// start failing and one when a list completes again, rather than a line
// per attempt. Safe for concurrent use.
type outage struct {
	log logr.Logger

	mu    sync.Mutex
	since time.Time // the first failure since the last list; zero for none
}

// failed records the result of a list or watch request.
func (o *outage) failed(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.since.IsZero() {
		o.log.V(4).Info("Listing or watching the node's pods failed again", "err", err.Error())
		return
	}
	o.since = time.Now()
	o.log.Error(err, "Cannot list or watch the node's pods; the pods stand as last listed, retrying with back-off")
}

// over records a completed list.
func (o *outage) over() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return
	}
	o.log.Info("Listed the node's pods again", "failingFor", time.Since(o.since).Round(time.Millisecond))
	o.since = time.Time{}
}

// notifyingStore is the reflector's store: a cache.Store that signals
// changed (without blocking, coalescing) after every change, and remembers
// whether a complete list arrived.
type notifyingStore struct {
	cache.Store
	changed chan struct{}
	// onReplace, when set, is called after each complete list.
	onReplace func()

	mu     sync.Mutex
	listed bool
	// onChange, when set, is called after every change too (a Source's
	// Start with a Driver).
	onChange func()
}

func newNotifyingStore() *notifyingStore {
	return &notifyingStore{
		Store:   cache.NewStore(cache.MetaNamespaceKeyFunc),
		changed: make(chan struct{}, 1),
	}
}

func (s *notifyingStore) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
	s.mu.Lock()
	f := s.onChange
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

// setOnChange sets the function notify calls; nil for none.
func (s *notifyingStore) setOnChange(f func()) {
	s.mu.Lock()
	s.onChange = f
	s.mu.Unlock()
}

// dropManagedFields drops the metadata.managedFields of a pod the
// reflector just decoded, before any store holds it: nothing in the agent
// reads them, and they are a third of what a running pod's object holds
// (its server-side apply records: the creator's fields and the agent's
// own status fields). The object is not shared yet; a pod without them is
// left untouched.
func dropManagedFields(obj any) {
	if p, ok := obj.(*v1.Pod); ok && p.ManagedFields != nil {
		p.ManagedFields = nil
	}
}

func (s *notifyingStore) Add(obj any) error {
	dropManagedFields(obj)
	err := s.Store.Add(obj)
	s.notify()
	return err
}

func (s *notifyingStore) Update(obj any) error {
	dropManagedFields(obj)
	shareUnchanged(s.Store, obj)
	return s.update(obj)
}

// update stores obj, prepared already, and signals the change.
func (s *notifyingStore) update(obj any) error {
	err := s.Store.Update(obj)
	s.notify()
	return err
}

// shareUnchanged makes obj, a new version of a pod that the reflector just
// decoded, share with the version store holds the parts that did not
// change: the spec, and the metadata's names, labels, annotations, owner
// references and finalizers. A running pod's versions differ in little
// more than their status (each status write makes one), and the agent's
// parts may each hold a different version of it (the pod workers the one
// they last acted on, the pod manager the newest, the status manager the
// one it wrote): shared, every version past the first costs the pod its
// status and its top-level object instead of a full copy. Stored pods are
// read-only; obj is not shared yet. Equal means equal field for field
// (reflect.DeepEqual), so a reader sees the very values the new version
// was decoded with.
func shareUnchanged(store cache.Store, obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	prev, exists, err := store.Get(p)
	if err != nil || !exists {
		return
	}
	old, ok := prev.(*v1.Pod)
	if !ok || old == p || old.UID != p.UID {
		return
	}
	if reflect.DeepEqual(old.Spec, p.Spec) {
		p.Spec = old.Spec
	}
	m, o := &p.ObjectMeta, &old.ObjectMeta
	if m.Name == o.Name && m.Namespace == o.Namespace && m.GenerateName == o.GenerateName {
		m.Name, m.Namespace, m.GenerateName = o.Name, o.Namespace, o.GenerateName
	}
	m.UID = o.UID
	if maps.Equal(m.Labels, o.Labels) && (m.Labels == nil) == (o.Labels == nil) {
		m.Labels = o.Labels
	}
	if maps.Equal(m.Annotations, o.Annotations) && (m.Annotations == nil) == (o.Annotations == nil) {
		m.Annotations = o.Annotations
	}
	if reflect.DeepEqual(m.OwnerReferences, o.OwnerReferences) {
		m.OwnerReferences = o.OwnerReferences
	}
	if slices.Equal(m.Finalizers, o.Finalizers) && (m.Finalizers == nil) == (o.Finalizers == nil) {
		m.Finalizers = o.Finalizers
	}
}

func (s *notifyingStore) Delete(obj any) error {
	err := s.Store.Delete(obj)
	s.notify()
	return err
}

func (s *notifyingStore) Replace(list []any, resourceVersion string) error {
	for _, obj := range list {
		dropManagedFields(obj)
	}
	err := s.Store.Replace(list, resourceVersion)
	s.mu.Lock()
	s.listed = true
	s.mu.Unlock()
	if s.onReplace != nil && err == nil {
		s.onReplace()
	}
	s.notify()
	return err
}

// snapshot returns the stored pods sorted by namespace and name, and false
// before the first complete list.
func (s *notifyingStore) snapshot() ([]*v1.Pod, bool) {
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	if !listed {
		return nil, false
	}
	items := s.Store.List()
	pods := make([]*v1.Pod, 0, len(items))
	for _, it := range items {
		if p, ok := it.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return pods, true
}
