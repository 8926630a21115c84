package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/logagg"
	"github.com/nodekit/nodekit/runtime"
)

// Lister lists the runtime's sandboxes and containers: the two CRI calls
// Generic makes. runtime.RuntimeService satisfies it. A Lister that is
// also a runtime.WireLister is listed through that instead, its answers
// read in wire form.
type Lister interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// StatusGetterFunc adapts a function to a StatusGetter.
type StatusGetterFunc func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error)

// GetPodStatus calls f.
func (f StatusGetterFunc) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	return f(ctx, uid, name, namespace)
}

var (
	_ StatusGetter   = StatusGetterFunc(nil)
	_ EventGenerator = (*Generic)(nil)
)

// GenericOptions configures a Generic PLEG. The zero value gives the
// kubelet's defaults.
type GenericOptions struct {
	// RelistPeriod is the pause between the end of one relist and the
	// start of the next. Defaults to 1s.
	RelistPeriod time.Duration
	// RelistThreshold is how long Healthy tolerates going without a
	// successful relist. Defaults to 3m.
	RelistThreshold time.Duration
	// ChannelCapacity is the capacity of the Events channel. Defaults to
	// 1000.
	ChannelCapacity int
	// Logger receives failed relists and inspections, dropped events
	// (errors) and per-relist details (V(4)). Defaults to a logger that
	// discards.
	Logger logr.Logger
	// OnRelist, when set, is told of every relist that listed the
	// runtime: how long it took, and the time since the start of the
	// previous one (0 for the first), the kubelet's
	// kubelet_pleg_relist_duration_seconds and
	// kubelet_pleg_relist_interval_seconds. It must not block. Defaults
	// to nil: none.
	OnRelist func(duration, interval time.Duration)
}

// withDefaults applies the defaults and validates the options.
func (o GenericOptions) withDefaults() (GenericOptions, error) {
	if o.RelistPeriod == 0 {
		o.RelistPeriod = time.Second
	}
	if o.RelistThreshold == 0 {
		o.RelistThreshold = 3 * time.Minute
	}
	if o.ChannelCapacity == 0 {
		o.ChannelCapacity = 1000
	}
	switch {
	case o.RelistPeriod < 0:
		return o, fmt.Errorf("pleg: RelistPeriod must be positive, got %v", o.RelistPeriod)
	case o.RelistThreshold < o.RelistPeriod:
		return o, fmt.Errorf("pleg: RelistThreshold (%v) must not be shorter than RelistPeriod (%v)", o.RelistThreshold, o.RelistPeriod)
	case o.ChannelCapacity < 0:
		return o, fmt.Errorf("pleg: ChannelCapacity must not be negative, got %d", o.ChannelCapacity)
	}
	return o, nil
}

// Generic is the relisting PLEG, the kubelet's generic PLEG: every
// RelistPeriod it lists all sandboxes and containers, compares each one's
// state with the previous relist, reads the status of the pods that
// changed into the Cache, and sends their events. It is safe for
// concurrent use; relists never overlap. It lives until the Run that uses
// it returns; its Events channel is never closed.
//
// Like the kubelet's, it sees states, not transitions: a container
// created, exited and removed between two relists goes unnoticed, and a
// sandbox is reported as a container (running while ready, exited
// otherwise). Sandboxes and containers without the runtime.LabelPodUID
// label (sandboxes: or a metadata UID) are not nodekit's and are ignored.
type Generic struct {
	lister Lister
	// wire is the lister's runtime.WireLister capability, nil without
	// one or once it answered Unimplemented; sandboxItems and
	// containerItems are relistWire's scratch space. Relist's mutex
	// guards them.
	wire                         runtime.WireLister
	sandboxItems, containerItems []wireItem
	// sandboxBuf and containerBuf hold the last answers' bytes, which
	// the next relist reuses (see relistWire).
	sandboxBuf, containerBuf []byte

	status StatusGetter
	cache  Cache
	opts   GenericOptions
	log    logr.Logger
	// errs aggregates the error lines that can recur on every relist
	// (a failed list, a full channel, a pod that cannot be inspected),
	// so that they cannot flood the log.
	errs *logagg.Aggregator

	events     chan *Event
	dropped    atomic.Uint64
	relistTime atomic.Int64 // start of the last successful list, Unix ns; 0 before
	running    atomic.Bool

	mu sync.Mutex // serialises Relist and guards the tracker
	// tracker decides what each relist reports; Relist does the I/O
	// around it.
	tracker
	// announced, set by an Evented PLEG, reports whether its event stream
	// already sent the events of every change a relist found in pod: the
	// relist then commits the pod without sending them again. Nil for a
	// Generic PLEG of its own.
	announced func(pod *podRecord) bool
}

// NewGeneric returns a Generic PLEG reading the runtime through lister and
// status, keeping cache up to date. It starts nothing; call Run.
func NewGeneric(lister Lister, status StatusGetter, cache Cache, opts GenericOptions) (*Generic, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case lister == nil:
		return nil, errors.New("pleg: NewGeneric needs a Lister")
	case status == nil:
		return nil, errors.New("pleg: NewGeneric needs a StatusGetter")
	case cache == nil:
		return nil, errors.New("pleg: NewGeneric needs a Cache")
	}
	wire, _ := lister.(runtime.WireLister)
	log := o.Logger.WithName("pleg")
	return &Generic{
		wire:    wire,
		lister:  lister,
		status:  status,
		cache:   cache,
		opts:    o,
		log:     log,
		errs:    logagg.New(log, logagg.Options{}),
		events:  make(chan *Event, o.ChannelCapacity),
		tracker: newTracker(),
	}, nil
}

// Events returns the channel of pod lifecycle events. There is one
// consumer.
func (g *Generic) Events() <-chan *Event { return g.events }

// DroppedEvents returns how many events could not be sent because the
// channel was full. Each drop is made good by a PodSync event for the pod
// on a later relist.
func (g *Generic) DroppedEvents() uint64 { return g.dropped.Load() }

// Healthy returns an error if no relist has listed the runtime yet, or if
// the last one started more than RelistThreshold ago.
func (g *Generic) Healthy() error {
	ns := g.relistTime.Load()
	if ns == 0 {
		return errors.New("pleg: no relist has completed yet")
	}
	if elapsed := time.Since(time.Unix(0, ns)); elapsed > g.opts.RelistThreshold {
		return fmt.Errorf("pleg: last relist was %v ago; threshold is %v", elapsed, g.opts.RelistThreshold)
	}
	return nil
}

// Run relists at once, then RelistPeriod after each relist ends, until ctx
// ends; it returns nil then. A failed relist is logged and tried again on
// the next period. Run must not be called again before it returned.
func (g *Generic) Run(ctx context.Context) error {
	if !g.running.CompareAndSwap(false, true) {
		return errors.New("pleg: Run called while already running")
	}
	defer g.running.Store(false)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if err := g.Relist(ctx); err != nil && ctx.Err() == nil {
			g.errs.Error(err, "relist failed")
		}
		g.errs.Flush()
		timer.Reset(g.opts.RelistPeriod)
	}
}

// Relist lists the runtime once, updates the cache for the pods that
// changed, and sends their events. Run calls it every period; tests and
// benchmarks may call it directly (calls are serialised). It returns an
// error when listing the runtime failed or ctx ended; the failure to
// inspect a pod is logged, and the pod is inspected again on the next
// relist.
func (g *Generic) Relist(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()

	start := time.Now()
	var (
		pods                    []*podRecord
		dropped                 int
		nSandboxes, nContainers int
		err                     error
	)
	if g.wire != nil {
		pods, dropped, nSandboxes, nContainers, err = g.relistWire(ctx)
		if errors.Is(err, runtime.ErrUnimplemented) {
			g.log.V(1).Info("the runtime does not list in wire form; relisting with decoded lists", "reason", err.Error())
			g.wire = nil
		} else if err != nil {
			return err
		}
	}
	if g.wire == nil {
		sandboxes, err := g.lister.ListPodSandbox(ctx, nil)
		if err != nil {
			return fmt.Errorf("pleg: list sandboxes: %w", err)
		}
		containers, err := g.lister.ListContainers(ctx, nil)
		if err != nil {
			return fmt.Errorf("pleg: list containers: %w", err)
		}
		pods, dropped = g.tracker.diff(sandboxes, containers, g.send)
		nSandboxes, nContainers = len(sandboxes), len(containers)
	}
	prev := g.relistTime.Swap(start.UnixNano())
	if g.opts.OnRelist != nil {
		defer func() {
			var interval time.Duration
			if prev != 0 {
				interval = start.Sub(time.Unix(0, prev))
			}
			g.opts.OnRelist(time.Since(start), interval)
		}()
	}

	var droppedPods, inspected int
	var rest []*podRecord
	for i, pod := range pods {
		if ctx.Err() != nil {
			// Give up on the rest: their records stay uncommitted, so
			// the next relist finds the same changes again.
			rest = pods[i:]
			break
		}
		inspected++
		n := g.syncPod(ctx, pod, start)
		if n > 0 {
			dropped += n
			droppedPods++
		}
	}
	g.tracker.finish(rest)

	g.cache.UpdateTime(start)

	if dropped > 0 {
		g.dropped.Add(uint64(dropped))
		g.errs.Error(nil, "event channel full, events dropped; their pods get a PodSync on the next relist",
			"dropped", dropped, "pods", droppedPods, "capacity", cap(g.events), "droppedTotal", g.dropped.Load())
	}
	if l := g.log.V(4); l.Enabled() {
		l.Info("relisted", "sandboxes", nSandboxes, "containers", nContainers,
			"podsInspected", inspected, "duration", time.Since(start))
	}
	return ctx.Err()
}

// relistWire lists the runtime through its runtime.WireLister and folds
// the answers into the tracker, reading from their bytes only what the
// tracker compares (IDs and states; the labels and metadata of what it
// does not know yet). It returns what tracker.diff returns and how many
// sandboxes and containers were listed. An error wrapping
// runtime.ErrUnimplemented means the lister cannot list in wire form.
func (g *Generic) relistWire(ctx context.Context) (pods []*podRecord, dropped, nSandboxes, nContainers int, err error) {
	// Each relist reads its answers into the buffers of the last: at
	// 10,000 pods a fresh pair was megabytes of garbage every second, whose
	// collection cost more than the relist. A buffer much larger than its
	// last answer (the pods went) is dropped, so that what is held stays
	// about the size of the runtime's lists.
	sb, err := g.wire.ListPodSandboxWire(ctx, nil, g.sandboxBuf)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("pleg: list sandboxes: %w", err)
	}
	g.sandboxBuf = keepBuffer(sb)
	cs, err := g.wire.ListContainersWire(ctx, nil, g.containerBuf)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("pleg: list containers: %w", err)
	}
	g.containerBuf = keepBuffer(cs)
	g.sandboxItems, err = splitList(sb, fieldSandboxState, g.sandboxItems[:0])
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("pleg: list sandboxes: %w", err)
	}
	g.containerItems, err = splitList(cs, fieldContainerState, g.containerItems[:0])
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("pleg: list containers: %w", err)
	}
	g.tracker.begin()
	if err := g.tracker.foldWire(sb, g.sandboxItems, cs, g.containerItems); err != nil {
		g.tracker.abort()
		return nil, 0, 0, 0, fmt.Errorf("pleg: list: %w", err)
	}
	pods, dropped = g.tracker.end(g.send)
	return pods, dropped, len(g.sandboxItems), len(g.containerItems), nil
}

// readAt is the optional capability of a Cache that tells when a pod's
// status held was read (StatusCache has it).
type readAt interface {
	ReadAt(uid types.UID) (time.Time, bool)
}

// readSince reports whether the cache holds a status of the pod read
// after since, and the pod owes no retry of a failed inspection.
func (g *Generic) readSince(pod *podRecord, since time.Time) bool {
	c, ok := g.cache.(readAt)
	if !ok || pod.owed&retryInspect != 0 {
		return false
	}
	at, ok := c.ReadAt(pod.uid)
	return ok && at.After(since)
}

// keepBuffer returns the answer b for the next relist to reuse, or nil
// when its capacity is more than four times its length (and above 64
// KiB): the runtime's lists shrank, and the next relist allocates one of
// their size.
func keepBuffer(b []byte) []byte {
	if cap(b) > 64<<10 && cap(b) > 4*len(b) {
		return nil
	}
	return b
}

// syncPod inspects a pod the tracker found changed (or owed a retry) and
// updates the cache, or deletes a pod that is gone from it, then has the
// tracker commit the pod and send its events. It returns how many events
// the channel could not take.
func (g *Generic) syncPod(ctx context.Context, pod *podRecord, listed time.Time) int {
	if g.tracker.gone(pod) {
		g.cache.Delete(pod.uid)
		return g.tracker.commit(pod, g.send)
	}
	if g.cachedAsListed(pod) {
		// The cache holds a read of the pod (made after a sync, or on
		// container events) that shows every container and sandbox as
		// listed: reading it again would find the same.
		if pod.owed == 0 && g.announced != nil && g.announced(pod) {
			return g.tracker.commit(pod, sentBefore)
		}
		return g.tracker.commit(pod, g.send)
	}
	if g.readSince(pod, listed) {
		// The cache holds a read of the pod made after this relist
		// listed it (by the sync that started its containers): reading
		// it again would find it as fresh, and the events the list gave
		// go out as they are. A start of thousands of pods keeps the
		// relists behind it; this spares them one read of each pod.
		return g.tracker.commit(pod, g.send)
	}
	ts := time.Now()
	status, err := g.status.GetPodStatus(ctx, pod.uid, pod.name, pod.namespace)
	if err == nil && status != nil {
		status.IPs = g.keepIPs(pod.uid, status)
	}
	g.cache.Set(pod.uid, status, err, ts)
	if err != nil {
		if ctx.Err() == nil {
			g.errs.ErrorFor(string(pod.uid), err, "cannot inspect pod; retrying on the next relist",
				"podUID", pod.uid, "pod", pod.namespace+"/"+pod.name)
		}
		// The tracker leaves the records uncommitted: the next relist
		// computes the same events and sends them once the inspection
		// works.
		g.tracker.inspectFailed(pod)
		return 0
	}
	return g.tracker.commit(pod, g.send)
}

// sentBefore is the sendFunc of a commit whose events were sent before.
func sentBefore(*Event) bool { return true }

// cachedAsListed reports whether the cache holds a status of the pod, read
// without error, whose containers and sandboxes are exactly those this
// relist lists, each in the state listed, and the pod owes no failed
// inspection. The agent reads a pod's status after every sync that
// changed it, and the evented PLEG on every container event: a relist
// after them need not read it again.
func (g *Generic) cachedAsListed(pod *podRecord) bool {
	if pod.owed&retryInspect != 0 {
		return false
	}
	st, err := g.cache.Get(pod.uid)
	if err != nil || st == nil {
		return false
	}
	live := 0
	for _, rec := range pod.ctrs {
		if rec.cur == stateNonExistent {
			continue
		}
		live++
		if cachedState(st, rec.id) != rec.cur {
			return false
		}
	}
	return live > 0 && live == len(st.ContainerStatuses)+len(st.SandboxStatuses)
}

// cachedState is the state of container or sandbox id in st as a relist
// compares it; stateNonExistent when st does not show it.
func cachedState(st *runtime.PodStatus, id string) plegState {
	for _, c := range st.ContainerStatuses {
		if c.ID != id {
			continue
		}
		switch c.State {
		case runtime.ContainerStateRunning:
			return stateRunning
		case runtime.ContainerStateExited:
			return stateExited
		}
		return stateUnknown
	}
	for _, s := range st.SandboxStatuses {
		if s.GetId() == id {
			return sandboxState(s.GetState())
		}
	}
	return stateNonExistent
}

// send offers ev to the channel without blocking.
func (g *Generic) send(ev *Event) bool {
	select {
	case g.events <- ev:
		return true
	default:
		return false
	}
}

// keepIPs returns the IPs to record for the pod: the new status's, or,
// when it has none and no sandbox is ready (the network was torn down),
// the IPs cached before, so a finished pod keeps reporting its IP, as the
// kubelet does.
func (g *Generic) keepIPs(uid types.UID, status *runtime.PodStatus) []string {
	if len(status.IPs) != 0 {
		return status.IPs
	}
	for _, s := range status.SandboxStatuses {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs
		}
	}
	old, err := g.cache.Get(uid)
	if err != nil || old == nil {
		return status.IPs
	}
	return old.IPs
}
