package pleg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// EventedRuntime is what Evented reads: the two lists of a relist and the
// CRI container event stream. runtime/cri.Client and runtimetest.Runtime
// satisfy it.
type EventedRuntime interface {
	Lister
	runtime.ContainerEventStreamer
}

var _ EventGenerator = (*Evented)(nil)

// EventedOptions configures an Evented PLEG. The zero value gives the
// kubelet's defaults.
type EventedOptions struct {
	// RelistPeriod is the relist period while the event stream is not
	// working (the generic PLEG's). Defaults to 1s.
	RelistPeriod time.Duration
	// RelistThreshold is how long Healthy tolerates going without a
	// successful relist while the event stream is not working. Defaults to
	// 3m.
	RelistThreshold time.Duration
	// EventedRelistPeriod is the period of the safety-net relist while the
	// event stream works, the kubelet's in evented mode. Defaults to 5m.
	EventedRelistPeriod time.Duration
	// EventedRelistThreshold is how long Healthy tolerates going without a
	// relist or a stream message while the event stream works. Defaults to
	// 10m.
	EventedRelistThreshold time.Duration
	// MaxStreamRetries is how many times in a row the stream may fail
	// before Evented falls back to relisting every RelistPeriod and
	// retries the stream only every StreamRetryPeriod. A runtime that
	// answers Unimplemented gets the fall-back at once. Defaults to 5.
	MaxStreamRetries int
	// StreamRetryPeriod is the longest wait between two attempts to open
	// the event stream, reached by a back-off doubling from 100ms after
	// each failure; a runtime that answered Unimplemented is asked again
	// every StreamRetryPeriod. Defaults to 30s.
	StreamRetryPeriod time.Duration
	// CacheRefreshPeriod is how often, while the event stream works, the
	// Cache is declared up to date (Cache.UpdateTime), which releases pod
	// workers waiting for a status newer than their last sync. Defaults
	// to 2s, the kubelet's. With a StatusCache the refreshes come only
	// while such a reader waits, at the instants of a ticker of this
	// period started with the stream's consumer, and the cache is live
	// (StatusCache.SetLive) while the stream works: an idle agent's PLEG
	// does not wake every period to declare a cache current that no one
	// waits on.
	CacheRefreshPeriod time.Duration
	// ChannelCapacity is the capacity of the Events channel and of the
	// buffer of CRI events. Defaults to 1000.
	ChannelCapacity int
	// Logger receives the switches between streaming and relisting (info),
	// failed relists, inspections and dropped events (errors) and
	// per-event details (V(4)). Defaults to a logger that discards.
	Logger logr.Logger
	// OnRelist is GenericOptions.OnRelist, for the relists of either
	// mode. Defaults to nil: none.
	OnRelist func(duration, interval time.Duration)
}

// withDefaults applies the defaults and validates the options.
func (o EventedOptions) withDefaults() (EventedOptions, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.RelistPeriod, time.Second)
	def(&o.RelistThreshold, 3*time.Minute)
	def(&o.EventedRelistPeriod, 5*time.Minute)
	def(&o.EventedRelistThreshold, 10*time.Minute)
	def(&o.StreamRetryPeriod, 30*time.Second)
	def(&o.CacheRefreshPeriod, 2*time.Second)
	if o.MaxStreamRetries == 0 {
		o.MaxStreamRetries = 5
	}
	if o.ChannelCapacity == 0 {
		o.ChannelCapacity = 1000
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RelistPeriod", o.RelistPeriod}, {"EventedRelistPeriod", o.EventedRelistPeriod},
		{"StreamRetryPeriod", o.StreamRetryPeriod}, {"CacheRefreshPeriod", o.CacheRefreshPeriod},
	} {
		if d.v < 0 {
			return o, fmt.Errorf("pleg: %s must be positive, got %v", d.name, d.v)
		}
	}
	switch {
	case o.RelistThreshold < o.RelistPeriod:
		return o, fmt.Errorf("pleg: RelistThreshold (%v) must not be shorter than RelistPeriod (%v)", o.RelistThreshold, o.RelistPeriod)
	case o.EventedRelistThreshold < o.EventedRelistPeriod:
		return o, fmt.Errorf("pleg: EventedRelistThreshold (%v) must not be shorter than EventedRelistPeriod (%v)", o.EventedRelistThreshold, o.EventedRelistPeriod)
	case o.MaxStreamRetries < 0:
		return o, fmt.Errorf("pleg: MaxStreamRetries must not be negative, got %d", o.MaxStreamRetries)
	case o.ChannelCapacity < 0:
		return o, fmt.Errorf("pleg: ChannelCapacity must not be negative, got %d", o.ChannelCapacity)
	}
	return o, nil
}

func (o EventedOptions) generic() GenericOptions {
	return GenericOptions{
		RelistPeriod:    o.RelistPeriod,
		RelistThreshold: o.RelistThreshold,
		ChannelCapacity: o.ChannelCapacity,
		Logger:          o.Logger,
		OnRelist:        o.OnRelist,
	}
}

// The stream's timing constants.
const (
	// streamSettle is how long a stream must stay open, without an event,
	// to count as working: a runtime without events answers the first
	// receive at once.
	streamSettle = time.Second
	// firstStreamRetry is the wait after the first failure of a stream;
	// it doubles with every failure in a row, up to StreamRetryPeriod.
	firstStreamRetry = 100 * time.Millisecond
	// maxEventBatch bounds the CRI events handled together (one status
	// read per pod).
	maxEventBatch = 256
)

// Evented is the event-driven PLEG, the kubelet's evented PLEG: it
// consumes the runtime's container events (CRI GetContainerEvents), puts
// the status of each pod they concern into the Cache (built from the
// statuses the events carry when they do, else read), and sends the
// matching pod lifecycle events; a Generic PLEG relists every 5 minutes as
// a safety net. While the stream does not work — the runtime answers
// Unimplemented (containerd 1.6), or the stream failed MaxStreamRetries
// times in a row — it relists every second like Generic, and tries the
// stream again now and then, going back to events once the stream works.
//
// It is safe for concurrent use. It lives until the Run that uses it
// returns; its Events channel is never closed and is shared by both
// modes.
type Evented struct {
	rt     EventedRuntime
	status StatusGetter
	cache  Cache
	opts   EventedOptions
	log    logr.Logger
	g      *Generic // relists, owns the Events channel and the drop counter

	running atomic.Bool
	kick    chan struct{} // capacity 1: relist now
	opened  chan struct{} // capacity 1: a stream attempt has opened
	events  atomic.Uint64 // CRI events handled
	// statuses is true while the events bring the statuses of their pods
	// into the cache: the last events of the stream open, but DELETED
	// ones, carried the statuses they are built from (carryStatuses).
	statuses atomic.Bool

	mu sync.Mutex
	// attempt numbers the stream attempts; open is true while attempt is
	// in progress and established; up is true once it settled.
	attempt uint64
	open    bool
	up      bool
	// lastStream is the time of the last sign of a working stream: it
	// settled, delivered an event, or ended after having worked.
	lastStream time.Time

	// pending holds the pods the consumer owes something: a status read
	// that failed, or a PodSync for events the channel could not take.
	// Only the consumer goroutine uses it.
	pending map[types.UID]*pendingPod
	batch   []*runtimeapi.ContainerEventResponse

	// witnessed holds the state of each container and sandbox in the
	// events whose lifecycle events went out (the cache updated first),
	// with the number of the relist they may serve (relists counts them).
	// A relist that finds a pod changed to exactly the states witnessed
	// sends nothing again (Generic.announced): after the stream was lost
	// in a burst, the relist that takes over reports only what the stream
	// missed, not every change since the previous relist, which at
	// thousands of pods overflowed the events channel with duplicates and
	// synced every pod once more. Entries go once a relist used them, on
	// a DELETED event, or after the relist they were for.
	wmu       sync.Mutex
	witnessed map[string]witness
	relists   uint64
}

// witness is the state of a container or sandbox an event showed.
type witness struct {
	state  plegState
	relist uint64
	pod    types.UID
}

type pendingPod struct {
	name, namespace string
	inspect         bool // GetPodStatus failed: read again, then PodSync
	sync            bool // a PodSync is owed
}

// NewEvented returns an Evented PLEG on rt, reading statuses through
// status into cache. It starts nothing; call Run.
func NewEvented(rt EventedRuntime, status StatusGetter, cache Cache, opts EventedOptions) (*Evented, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if rt == nil {
		return nil, errors.New("pleg: NewEvented needs an EventedRuntime")
	}
	g, err := NewGeneric(rt, status, cache, o.generic())
	if err != nil {
		return nil, err
	}
	e := &Evented{
		rt:        rt,
		status:    status,
		cache:     cache,
		opts:      o,
		log:       o.Logger.WithName("pleg"),
		g:         g,
		kick:      make(chan struct{}, 1),
		opened:    make(chan struct{}, 1),
		pending:   make(map[types.UID]*pendingPod),
		witnessed: make(map[string]witness),
	}
	g.announced = e.announced
	return e, nil
}

// NewAuto returns the PLEG for rt: an Evented PLEG when rt can stream
// container events (it implements runtime.ContainerEventStreamer, as the
// CRI client does, whether or not the runtime behind it serves events),
// a Generic one relisting every opts.RelistPeriod otherwise.
func NewAuto(rt Lister, status StatusGetter, cache Cache, opts EventedOptions) (EventGenerator, error) {
	if ert, ok := rt.(EventedRuntime); ok {
		return NewEvented(ert, status, cache, opts)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return NewGeneric(rt, status, cache, o.generic())
}

// Events returns the channel of pod lifecycle events. There is one
// consumer.
func (e *Evented) Events() <-chan *Event { return e.g.events }

// DroppedEvents returns how many events could not be sent because the
// channel was full. Each drop is made good by a PodSync event for the pod.
func (e *Evented) DroppedEvents() uint64 { return e.g.DroppedEvents() }

// Streaming reports whether the event stream works now (events drive the
// PLEG, the relist is the slow safety net) rather than relisting every
// RelistPeriod.
func (e *Evented) Streaming() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.up
}

// StreamsStatuses reports whether the event stream works now and its
// events bring their pods' statuses into the Cache without a status read
// (the runtime sends the statuses with each event, as containerd 2.x
// does, and the StatusGetter builds a pod's status from them): a change
// the agent makes shows in the Cache as soon as its event arrives.
func (e *Evented) StreamsStatuses() bool {
	return e.statuses.Load() && e.Streaming()
}

// StreamEvents returns how many container events the stream delivered.
func (e *Evented) StreamEvents() uint64 { return e.events.Load() }

// Relist relists the runtime once (see Generic.Relist).
func (e *Evented) Relist(ctx context.Context) error {
	e.wmu.Lock()
	e.relists++
	n := e.relists
	e.wmu.Unlock()
	err := e.g.Relist(ctx)
	if err != nil {
		// Nothing was committed (the listing failed) or not everything:
		// what was witnessed serves the next relist.
		return err
	}
	// What was witnessed before this relist listed is either used, or
	// about containers the relist did not find changed or found gone.
	e.wmu.Lock()
	maps.DeleteFunc(e.witnessed, func(_ string, w witness) bool { return w.relist <= n })
	e.wmu.Unlock()
	return nil
}

// Healthy returns an error when neither a relist nor the event stream has
// shown a working runtime recently: within EventedRelistThreshold while
// the stream works, RelistThreshold otherwise. A working stream counts at
// the time it settled and at each event.
func (e *Evented) Healthy() error {
	e.mu.Lock()
	up, last := e.up, e.lastStream
	e.mu.Unlock()
	if ns := e.g.relistTime.Load(); ns != 0 {
		if t := time.Unix(0, ns); t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return errors.New("pleg: no relist has completed and no event stream has worked yet")
	}
	threshold := e.opts.RelistThreshold
	if up {
		threshold = e.opts.EventedRelistThreshold
	}
	if elapsed := time.Since(last); elapsed > threshold {
		return fmt.Errorf("pleg: last relist or stream activity was %v ago; threshold is %v", elapsed, threshold)
	}
	return nil
}

// Run relists at once and opens the event stream, then consumes the
// stream and relists every EventedRelistPeriod while it works, every
// RelistPeriod while it does not, until ctx ends; it returns nil then,
// after its goroutines exited. Run must not be called again before it
// returned.
func (e *Evented) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("pleg: Run called while already running")
	}
	defer e.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ch := make(chan *runtimeapi.ContainerEventResponse, e.opts.ChannelCapacity)
	var wg sync.WaitGroup
	wg.Go(func() { e.streamLoop(ctx, ch) })
	e.consume(ctx, ch)
	wg.Wait()
	return nil
}

// relistNow asks the consumer for a relist at once.
func (e *Evented) relistNow() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// relist relists, then arms timer for the period of the current mode.
// The consumer calls it at once, then at each period and when asked (the
// stream failed or came up): on its goroutine, which an idle agent's
// PLEG shares between its events and its relists (one goroutine less per
// agent); the events received meanwhile wait in their channel.
func (e *Evented) relist(ctx context.Context, timer *time.Timer) {
	if err := e.Relist(ctx); err != nil && ctx.Err() == nil {
		e.g.errs.Error(err, "relist failed")
	}
	e.g.errs.Flush()
	period := e.opts.RelistPeriod
	if e.Streaming() {
		period = e.opts.EventedRelistPeriod
	}
	timer.Reset(period)
}

// streamLoop opens the event stream again and again until ctx ends,
// deciding how long to wait between attempts and when to fall back.
func (e *Evented) streamLoop(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse) {
	failures := 0     // in a row
	fallback := false // relisting for good: failures reached MaxStreamRetries, or Unimplemented
	noEvents := false // the runtime answered Unimplemented (logged once)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		e.mu.Lock()
		e.attempt++
		id := e.attempt
		e.mu.Unlock()
		err := e.rt.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			e.mu.Lock()
			if e.attempt == id {
				e.open = true
			}
			e.mu.Unlock()
			select {
			case e.opened <- struct{}{}:
			default:
			}
		})
		now := time.Now()
		e.mu.Lock()
		wasUp := e.up
		e.open, e.up = false, false
		e.setLiveLocked(false)
		// The next stream may come from another runtime: what its events
		// carry is learned again.
		e.statuses.Store(false)
		if wasUp {
			e.lastStream = now
		}
		e.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("pleg: the event stream ended")
		}
		// Whatever the stream missed, a relist finds.
		e.relistNow()
		if wasUp {
			failures, fallback = 0, false
			e.log.Info("container event stream lost; relisting until it is back",
				"relistPeriod", e.opts.RelistPeriod, "reason", err.Error())
		}

		var wait time.Duration
		switch {
		case runtime.IsUnimplemented(err):
			if !noEvents {
				noEvents = true
				e.log.Info("container runtime does not stream container events; relisting instead",
					"relistPeriod", e.opts.RelistPeriod, "retryPeriod", e.opts.StreamRetryPeriod, "reason", err.Error())
			} else {
				e.log.V(4).Info("container runtime still does not stream container events", "reason", err.Error())
			}
			failures = max(failures+1, e.opts.MaxStreamRetries)
			fallback = true
			wait = e.opts.StreamRetryPeriod
		default:
			failures++
			if !fallback && failures >= e.opts.MaxStreamRetries {
				fallback = true
				e.log.Info("container event stream keeps failing; relisting until it works again",
					"failures", failures, "relistPeriod", e.opts.RelistPeriod, "reason", err.Error())
			} else {
				e.log.V(4).Info("container event stream failed; retrying", "failures", failures, "reason", err.Error())
			}
			wait = e.opts.StreamRetryPeriod
			if failures <= 20 {
				wait = min(firstStreamRetry<<(failures-1), e.opts.StreamRetryPeriod)
			}
		}
		timer.Reset(wait)
	}
}

// streamWorks marks the stream attempt id as working (it settled or
// delivered an event) and switches to evented mode if it was not.
func (e *Evented) streamWorks(id uint64, now time.Time) {
	e.mu.Lock()
	if !e.open || e.attempt != id {
		e.mu.Unlock()
		return
	}
	switched := !e.up
	e.up = true
	e.setLiveLocked(true)
	e.lastStream = now
	e.mu.Unlock()
	if switched {
		e.log.Info("container event stream works; relisting only as a safety net",
			"relistPeriod", e.opts.EventedRelistPeriod)
		// Relist once more, now that the stream surely runs: what
		// changed before it opened is found, and the period becomes the
		// evented one.
		e.relistNow()
	}
}

// consume handles the CRI events, settles new streams, refreshes the
// cache while the stream works, retries what it owes pods, and relists
// (see relist), until ctx ends.
func (e *Evented) consume(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse) {
	refresh := newRefreshTicks(e.cache, e.opts.CacheRefreshPeriod)
	defer refresh.stop()
	relist := time.NewTimer(0)
	defer relist.Stop()
	settle := time.NewTimer(0)
	<-settle.C
	defer settle.Stop()
	var settleID uint64
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	retryArmed := false

	for {
		select {
		case <-ctx.Done():
			return
		case <-e.opened:
			e.mu.Lock()
			id, open := e.attempt, e.open
			e.mu.Unlock()
			if open {
				settleID = id
				settle.Reset(streamSettle)
			}
		case <-settle.C:
			e.streamWorks(settleID, time.Now())
		case ev := <-ch:
			e.handleEvents(ctx, ev, ch)
		case <-refresh.waited:
			refresh.arm()
		case <-refresh.c():
			refresh.fired()
			if e.Streaming() {
				// Every event received so far is in the cache: handle the
				// ones waiting, then declare the cache current.
				ts := time.Now()
				select {
				case ev := <-ch:
					e.handleEvents(ctx, ev, ch)
				default:
				}
				e.cache.UpdateTime(ts)
			}
			// A reader that came meanwhile, or whose minTime the refresh
			// did not pass, waits for the next.
			refresh.rearm()
		case <-retry.C:
			retryArmed = false
			e.retryPending(ctx)
		case <-relist.C:
			e.relist(ctx, relist)
		case <-e.kick:
			relist.Stop()
			e.relist(ctx, relist)
		}
		if len(e.pending) > 0 && !retryArmed {
			retry.Reset(e.opts.RelistPeriod)
			retryArmed = true
		}
	}
}

// setLiveLocked tells a StatusCache whether the stream works: while it
// does, every change reaches the cache as it happens (StatusCache.SetLive).
func (e *Evented) setLiveLocked(live bool) {
	if c, ok := e.cache.(interface{ SetLive(bool) }); ok {
		c.SetLive(live)
	}
}

// waitedCache is the capability of a Cache that tells when a reader waits
// for a status newer than a time (StatusCache has it).
type waitedCache interface {
	NewerWaited() <-chan struct{}
	WaitingNewer() bool
}

// refreshTicks are the instants the consumer refreshes the cache at: a
// ticker's; with a waitedCache, the same instants (on the grid of a
// ticker started with them) but only while a reader waits for a newer
// status. Only the consumer's goroutine uses them.
type refreshTicks struct {
	period time.Duration
	cache  waitedCache
	// waited is the cache's NewerWaited, nil without a waitedCache.
	waited <-chan struct{}
	ticker *time.Ticker
	start  time.Time
	timer  *time.Timer
	armed  bool
}

func newRefreshTicks(c Cache, period time.Duration) *refreshTicks {
	t := &refreshTicks{period: period, start: time.Now()}
	if wc, ok := c.(waitedCache); ok {
		t.cache, t.waited = wc, wc.NewerWaited()
		t.timer = time.NewTimer(period)
		t.timer.Stop()
		// A reader that waited before the consumer started.
		t.rearm()
		return t
	}
	t.ticker = time.NewTicker(period)
	return t
}

// c is the channel of the next refresh, nil when none is armed.
func (t *refreshTicks) c() <-chan time.Time {
	if t.ticker != nil {
		return t.ticker.C
	}
	if !t.armed {
		return nil
	}
	return t.timer.C
}

// arm arms the timer for the next instant of the grid, unless armed.
func (t *refreshTicks) arm() {
	if t.timer == nil || t.armed {
		return
	}
	now := time.Now()
	k := now.Sub(t.start)/t.period + 1
	t.timer.Reset(t.start.Add(k * t.period).Sub(now))
	t.armed = true
}

// fired records that the armed timer fired.
func (t *refreshTicks) fired() { t.armed = false }

// rearm arms the timer if a reader still waits.
func (t *refreshTicks) rearm() {
	if t.cache != nil && t.cache.WaitingNewer() {
		t.arm()
	}
}

func (t *refreshTicks) stop() {
	if t.ticker != nil {
		t.ticker.Stop()
	}
	if t.timer != nil {
		t.timer.Stop()
	}
}

// handleEvents handles first and the events waiting behind it: one status
// read per pod, then the pod's lifecycle events.
func (e *Evented) handleEvents(ctx context.Context, first *runtimeapi.ContainerEventResponse, ch chan *runtimeapi.ContainerEventResponse) {
	batch := append(e.batch[:0], first)
drain:
	for len(batch) < maxEventBatch {
		select {
		case ev := <-ch:
			batch = append(batch, ev)
		default:
			break drain
		}
	}
	defer func() {
		clear(batch)
		e.batch = batch[:0]
		e.g.errs.Flush()
	}()
	e.events.Add(uint64(len(batch)))
	now := time.Now()
	e.mu.Lock()
	id, open := e.attempt, e.open
	e.mu.Unlock()
	if open {
		e.streamWorks(id, now)
	}

	// Group by pod, in order of first appearance.
	type podEvents struct {
		uid             types.UID
		name, namespace string
		events          []*runtimeapi.ContainerEventResponse
	}
	var pods []*podEvents
	byUID := make(map[types.UID]*podEvents)
	for _, ev := range batch {
		uid, name, ns := podOf(ev)
		if uid == "" {
			e.log.V(4).Info("container event without a pod; ignored", "containerID", ev.GetContainerId(), "type", ev.GetContainerEventType().String())
			continue
		}
		p := byUID[uid]
		if p == nil {
			p = &podEvents{uid: uid, name: name, namespace: ns}
			byUID[uid] = p
			pods = append(pods, p)
		}
		p.events = append(p.events, ev)
	}

	var dropped, droppedPods int
	for _, p := range pods {
		if ctx.Err() != nil {
			return
		}
		deleted := false
		for _, ev := range p.events {
			deleted = deleted || ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
		}
		if !deleted {
			e.statuses.Store(e.carryStatuses(p.events))
		}
		switch {
		case !deleted && e.readSince(p.uid, p.events):
		case !deleted && e.fromEvents(p.uid, p.events):
		case !e.inspect(ctx, p.uid, p.name, p.namespace, deleted):
			continue // the pod gets a PodSync once its status can be read
		}
		n := 0
		for _, ev := range p.events {
			if l := e.log.V(4); l.Enabled() {
				l.Info("container event", "podUID", p.uid, "containerID", ev.GetContainerId(), "type", ev.GetContainerEventType().String())
			}
			n += e.sendFor(p.uid, ev)
		}
		if n > 0 {
			dropped += n
			droppedPods++
			e.owe(p.uid, p.name, p.namespace).sync = true
			continue
		}
		e.witness(p.events)
	}
	if dropped > 0 {
		e.g.dropped.Add(uint64(dropped))
		e.g.errs.Error(nil, "event channel full, events dropped; their pods get a PodSync",
			"dropped", dropped, "pods", droppedPods, "capacity", cap(e.g.events), "droppedTotal", e.g.dropped.Load())
	}
}

// witness records the states the events show, their lifecycle events
// sent: the next relist need not send them again.
func (e *Evented) witness(events []*runtimeapi.ContainerEventResponse) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	n := e.relists + 1 // the next relist's
	for _, ev := range events {
		if ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
			delete(e.witnessed, ev.GetContainerId())
			continue
		}
		pod := types.UID(ev.GetPodSandboxStatus().GetMetadata().GetUid())
		if sb := ev.GetPodSandboxStatus(); sb.GetId() != "" {
			e.witnessed[sb.GetId()] = witness{state: sandboxState(sb.GetState()), relist: n, pod: pod}
		}
		for _, c := range ev.GetContainersStatuses() {
			if c.GetId() != "" {
				e.witnessed[c.GetId()] = witness{state: containerState(c.GetState()), relist: n, pod: pod}
			}
		}
	}
}

// announced reports whether every container and sandbox of pod that a
// relist found changed is in the state the event stream last showed: the
// stream sent the events of those changes, and a sync followed them. The
// entries it used are dropped then. It is Generic.announced, called during
// a relist.
func (e *Evented) announced(pod *podRecord) bool {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	for _, rec := range pod.ctrs {
		if rec.cur == rec.old {
			continue
		}
		if w, ok := e.witnessed[rec.id]; !ok || rec.cur == stateNonExistent || w.state != rec.cur {
			return false
		}
	}
	for _, rec := range pod.ctrs {
		if rec.cur != rec.old {
			delete(e.witnessed, rec.id)
		}
	}
	return true
}

// readSince reports whether the cache holds a status of the pod read
// after every one of events happened: a read the agent made itself, after
// changing the pod (the pod workers read a pod back after each sync that
// changed it), already shows what the events tell, and reading it again
// would double the runtime calls of every change the agent makes. Event
// times are the runtime's clock, read times the agent's: both are the
// host's wall clock. A cache that does not tell its read times (no ReadAt)
// is never taken as current.
func (e *Evented) readSince(uid types.UID, events []*runtimeapi.ContainerEventResponse) bool {
	c, ok := e.cache.(interface {
		ReadAt(types.UID) (time.Time, bool)
	})
	if !ok {
		return false
	}
	at, ok := c.ReadAt(uid)
	if !ok {
		return false
	}
	for _, ev := range events {
		if ev.GetCreatedAt() == 0 || !at.After(time.Unix(0, ev.GetCreatedAt())) {
			return false
		}
	}
	return true
}

// statusBuilder is the optional capability of a StatusGetter that builds
// a pod's status from a container event (podruntime.Manager has it).
type statusBuilder interface {
	PodStatusFromEvent(prev *runtime.PodStatus, ev *runtimeapi.ContainerEventResponse) (*runtime.PodStatus, bool)
}

// carryStatuses reports whether events carry what fromEvents builds a
// pod's status from, with a StatusGetter that can: each its time, its
// sandbox's status, and the status of the container it names. It does
// not depend on the cache, so that it is known for events that came
// after a read of their pod, which fromEvents does not see.
func (e *Evented) carryStatuses(events []*runtimeapi.ContainerEventResponse) bool {
	if _, ok := e.status.(statusBuilder); !ok {
		return false
	}
	for _, ev := range events {
		sb := ev.GetPodSandboxStatus()
		if ev.GetCreatedAt() == 0 || sb.GetId() == "" || sb.GetMetadata() == nil {
			return false
		}
		if id := ev.GetContainerId(); id != sb.GetId() &&
			!slices.ContainsFunc(ev.GetContainersStatuses(), func(c *runtimeapi.ContainerStatus) bool { return c.GetId() == id }) {
			return false
		}
	}
	return true
}

// fromEvents puts into the cache the pod's status as the events tell it,
// without reading the pod, when the StatusGetter can build a status from
// an event (podruntime.Manager.PodStatusFromEvent: the runtime sent the
// statuses of the event's sandbox and its containers with it), and reports
// whether it did. Events older than the cached status are skipped: the
// cached read shows them already.
func (e *Evented) fromEvents(uid types.UID, events []*runtimeapi.ContainerEventResponse) bool {
	b, ok := e.status.(statusBuilder)
	if !ok {
		return false
	}
	st, err := e.cache.Get(uid)
	if err != nil {
		return false
	}
	var readAt time.Time
	if c, ok := e.cache.(interface {
		ReadAt(types.UID) (time.Time, bool)
	}); ok {
		readAt, _ = c.ReadAt(uid)
	}
	var last time.Time
	for _, ev := range events {
		at := time.Unix(0, ev.GetCreatedAt())
		if ev.GetCreatedAt() != 0 && at.Before(readAt) {
			continue
		}
		next, ok := b.PodStatusFromEvent(st, ev)
		if !ok || ev.GetCreatedAt() == 0 {
			return false
		}
		st, last = next, at
	}
	if last.IsZero() {
		return true // every event is older than the cached status
	}
	st.IPs = e.g.keepIPs(uid, st)
	e.cache.Set(uid, st, nil, last)
	return true
}

// inspect reads the pod's status into the cache; on failure it records
// the error in the cache and owes the pod a new read. After a DELETED
// event (deleted), a pod of which nothing is left leaves the cache, as
// with a relist that no longer lists it.
func (e *Evented) inspect(ctx context.Context, uid types.UID, name, namespace string, deleted bool) bool {
	ts := time.Now()
	status, err := e.status.GetPodStatus(ctx, uid, name, namespace)
	if err != nil {
		e.cache.Set(uid, nil, err, ts)
		if ctx.Err() == nil {
			e.g.errs.ErrorFor(string(uid), err, "cannot inspect pod; retrying", "podUID", uid, "pod", namespace+"/"+name)
		}
		e.owe(uid, name, namespace).inspect = true
		return false
	}
	if status == nil {
		status = &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace}
	}
	if deleted && len(status.SandboxStatuses) == 0 && len(status.ContainerStatuses) == 0 {
		e.cache.Delete(uid)
		e.forget(uid)
		return true
	}
	status.IPs = e.g.keepIPs(uid, status)
	e.cache.Set(uid, status, nil, ts)
	return true
}

// forget drops what the relist's tracker and the witnesses hold of a pod
// of which nothing is left in the runtime, rather than keep it until the
// next relist (minutes away while the stream works).
func (e *Evented) forget(uid types.UID) {
	e.g.mu.Lock()
	ids := e.g.tracker.forget(uid)
	e.g.mu.Unlock()
	e.wmu.Lock()
	defer e.wmu.Unlock()
	for _, id := range ids {
		delete(e.witnessed, id)
	}
	maps.DeleteFunc(e.witnessed, func(_ string, w witness) bool { return w.pod == uid })
	if len(e.witnessed) == 0 {
		e.witnessed = make(map[string]witness) // a map keeps its room as it empties
	}
}

func (e *Evented) owe(uid types.UID, name, namespace string) *pendingPod {
	p := e.pending[uid]
	if p == nil {
		p = &pendingPod{name: name, namespace: namespace}
		e.pending[uid] = p
	}
	return p
}

// retryPending reads again the pods whose read failed and sends the
// PodSyncs owed.
func (e *Evented) retryPending(ctx context.Context) {
	for uid, p := range e.pending {
		if ctx.Err() != nil {
			return
		}
		if p.inspect {
			if !e.inspect(ctx, uid, p.name, p.namespace, false) {
				continue
			}
			p.inspect = false
			p.sync = true
		}
		if p.sync {
			if !e.g.send(&Event{ID: uid, Type: PodSync}) {
				e.g.dropped.Add(1)
				continue
			}
		}
		delete(e.pending, uid)
	}
	if len(e.pending) == 0 {
		// A burst (a churn overflowing the events channel) grows it to
		// thousands of pods, and a map keeps its room as it empties.
		e.pending = make(map[types.UID]*pendingPod)
	}
}

// sendFor sends the lifecycle events of one CRI event, as the kubelet's
// evented PLEG: STARTED gives ContainerStarted, STOPPED ContainerDied,
// DELETED ContainerDied and ContainerRemoved, CREATED nothing. It returns
// how many the channel could not take.
func (e *Evented) sendFor(uid types.UID, ev *runtimeapi.ContainerEventResponse) (dropped int) {
	send := func(t EventType) {
		if !e.g.send(&Event{ID: uid, Type: t, Data: ev.GetContainerId()}) {
			dropped++
		}
	}
	switch ev.GetContainerEventType() {
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		send(ContainerStarted)
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		send(ContainerDied)
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		send(ContainerDied)
		send(ContainerRemoved)
	}
	return dropped
}

// podOf returns the pod a CRI event concerns: from its sandbox status
// (the runtime.LabelPodUID label, or the metadata UID), or else from the
// labels of the container it names.
func podOf(ev *runtimeapi.ContainerEventResponse) (uid types.UID, name, namespace string) {
	if s := ev.GetPodSandboxStatus(); s != nil {
		u := s.GetLabels()[runtime.LabelPodUID]
		if u == "" {
			u = s.GetMetadata().GetUid()
		}
		if u != "" {
			return types.UID(u), s.GetMetadata().GetName(), s.GetMetadata().GetNamespace()
		}
	}
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() != ev.GetContainerId() {
			continue
		}
		l := c.GetLabels()
		if u := l[runtime.LabelPodUID]; u != "" {
			return types.UID(u), l[runtime.LabelPodName], l[runtime.LabelPodNamespace]
		}
	}
	return "", "", ""
}
