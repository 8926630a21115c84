package syncloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/logagg"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/sources"
)

// SyncHandler receives the loop's work. Each method is called from the
// loop's goroutine. The pods it is given are shared with the sources'
// state and with other pods (see package sources): treat them as
// read-only.
type SyncHandler interface {
	// HandlePodAdditions: pods new to the node (admit, then start).
	HandlePodAdditions(ctx context.Context, pods []*v1.Pod)
	// HandlePodUpdates: pods whose spec changed, or that are being deleted.
	HandlePodUpdates(ctx context.Context, pods []*v1.Pod)
	// HandlePodRemoves: pods their source no longer lists.
	HandlePodRemoves(ctx context.Context, pods []*v1.Pod)
	// HandlePodReconcile: pods whose status alone changed in their source.
	HandlePodReconcile(ctx context.Context, pods []*v1.Pod)
	// HandlePodSyncs: pods to sync now (work due, runtime event, probe
	// result).
	HandlePodSyncs(ctx context.Context, pods []*v1.Pod)
	// HandlePodCleanups: housekeeping; called only once every source is
	// ready.
	HandlePodCleanups(ctx context.Context) error
}

// HousekeepingSettler is the optional capability of a SyncHandler that
// tells when a housekeeping pass would find nothing to do
// (synchandler.Handler has it; a handler that wraps another forwards it
// only if what its own HandlePodCleanups does depends on nothing else).
// While it says so after a housekeeping tick, the loop stops its
// housekeeping ticks, but for one every Config.HousekeepingIdlePeriod,
// until any other message arrives; it then ticks at HousekeepingPeriod
// again, from that message on.
type HousekeepingSettler interface {
	// HousekeepingSettled reports whether a pass now would find nothing
	// to do, and would keep finding nothing until something changes that
	// reaches the loop as a message (a configuration update, a PLEG
	// event, work, a probe result, an extra channel's value,
	// HousekeepingDue). What changes out of the loop's sight waits for
	// the next idle tick.
	HousekeepingSettled() bool
}

// PodGetter finds the pod a runtime event or probe result concerns.
type PodGetter interface {
	GetPodByUID(uid types.UID) (*v1.Pod, bool)
}

// WorkQueue hands out the UIDs of pods whose sync is due.
// podworker.Queue implements it.
type WorkQueue interface {
	GetWork() []types.UID
}

// WokenQueue is the optional capability of a WorkQueue that signals when a
// pod must be synced before the next tick (podworker.Queue has it, for
// pods' active deadlines): the loop then takes the work at once.
type WokenQueue interface {
	Woken() <-chan struct{}
}

// DueQueue is the optional capability of a WorkQueue that tells when its
// earliest pod is due (podworker.Queue has it). The loop then takes the
// work at the first sync tick at or after that time, as polling GetWork
// every tick would, but does not wake at the ticks when nothing is due:
// an idle agent's loop sleeps until a pod is due or something else
// happens, where the kubelet's wakes every second. Earlier signals when a
// pod became the earliest due, and the loop looks at NextDue again.
type DueQueue interface {
	NextDue() (time.Time, bool)
	Earlier() <-chan struct{}
}

// Channel is an extra channel a user registers: each value received names
// pods to sync.
type Channel struct {
	// Name identifies the channel in logs.
	Name string
	C    <-chan []types.UID
}

// Config holds the channels the loop selects over and what it needs to use
// them. A nil channel is never selected.
type Config struct {
	// Updates is the merged pod configuration (sources.Config.Updates).
	Updates <-chan sources.PodUpdate
	// PLEG delivers pod lifecycle events.
	PLEG <-chan *pleg.Event
	// Liveness, Readiness and Startup deliver probe result changes.
	Liveness, Readiness, Startup <-chan probe.Update
	// Extra channels registered by the user.
	Extra []Channel

	// Pods resolves UIDs for PLEG events, probe results and work; required.
	Pods PodGetter
	// Work is consulted on every sync tick; nil means no work queue.
	Work WorkQueue
	// SourcesReady gates housekeeping; nil means always ready.
	SourcesReady func() bool
	// RuntimeHealthy is checked before each iteration; while it returns an
	// error the loop backs off (100ms doubling to 5s) instead of working.
	// Nil means always healthy.
	RuntimeHealthy func(ctx context.Context) error

	// SyncPeriod is the sync tick. Defaults to 1s.
	SyncPeriod time.Duration
	// HousekeepingPeriod is the housekeeping tick. Defaults to 2s.
	HousekeepingPeriod time.Duration
	// HousekeepingDue, when set, asks for a housekeeping pass before the
	// next tick: the agent passes the pod workers' Ended, so that a pod
	// whose worker finished has its runtime objects and state released
	// within a fraction of a period rather than at the next tick, up to a
	// period later. A pass it asks for runs no sooner than a quarter of
	// HousekeepingPeriod after the last one began, and waits out the rest
	// after a long pass (see housekeepingRest). Defaults to nil: passes
	// at the ticks only.
	HousekeepingDue <-chan struct{}
	// HousekeepingIdlePeriod is the housekeeping tick while a handler
	// that is a HousekeepingSettler says a pass would find nothing to do.
	// Defaults to 1m; at most half of HealthyThreshold, as the idle loop
	// completes an iteration at each.
	HousekeepingIdlePeriod time.Duration
	// HealthyThreshold: Healthy fails when an iteration has not completed
	// for this long. Defaults to max(2*SyncFrequency(1m), 5m) = 5m, as the
	// kubelet.
	HealthyThreshold time.Duration

	Logger logr.Logger
}

// Loop is the sync loop. Create it with New; Run it once.
type Loop struct {
	h   SyncHandler
	cfg Config
	log logr.Logger
	// errs aggregates the error lines that recur on every iteration or
	// pass while the runtime or a housekeeping dependency is down: logged
	// once, then once a minute with the count of those not logged.
	errs *logagg.Aggregator

	// lastIteration is the unix-nano time of the last completed iteration
	// (or of the start of Run).
	lastIteration atomic.Int64
	running       atomic.Bool
	// restUntil is when housekeeping may run again after a long pass
	// (see housekeepingRest). Only the loop's goroutine uses it.
	restUntil time.Time
	// lastPass is when the last housekeeping pass began; due fires when a
	// pass HousekeepingDue asked for may run, and dueArmed tells that it
	// is set. Only the loop's goroutine uses them.
	lastPass time.Time
	due      *time.Timer
	dueArmed bool
	// housekeeping is the housekeeping ticker, at HousekeepingPeriod, or
	// at HousekeepingIdlePeriod while settled; settler is the handler as
	// a HousekeepingSettler, nil when it is not one. Only the loop's
	// goroutine uses them.
	housekeeping *time.Ticker
	settler      HousekeepingSettler
	settled      bool
}

// housekeepingRest is how many times its own duration housekeeping rests
// after a pass before the next tick may run one, up to one
// HousekeepingPeriod: housekeeping, whose pass is linear in the pods,
// takes a small share of the loop's time however many pods and however
// loaded the machine. At 10,000 pods on a loaded machine a pass can take
// over a second, and passes every 2 s would hold the loop (and the PLEG
// events waiting on it) half the time. The rest never skips more than
// one tick in a row: housekeeping is what removes the runtime objects and
// directories of deleted pods, and under churn a pass of a second (the
// removals of the pods deleted since the last one) rested 9 s, during
// which nothing of the pods deleted meanwhile went. A pass shorter than a
// tenth of HousekeepingPeriod changes nothing.
const housekeepingRest = 9

// Errors of the loop.
var (
	// ErrNotHealthy is wrapped by Healthy's error.
	ErrNotHealthy = errors.New("syncloop: not healthy")
)

// New checks cfg, applies defaults and returns a Loop.
func New(h SyncHandler, cfg Config) (*Loop, error) {
	if h == nil {
		return nil, errors.New("syncloop: handler is required")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger.WithName("syncloop")
	return &Loop{h: h, cfg: cfg, log: log, errs: logagg.New(log, logagg.Options{})}, nil
}

func (c *Config) setDefaults() error {
	if c.Pods == nil {
		return errors.New("syncloop: Config.Pods is required")
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = time.Second
	}
	if c.HousekeepingPeriod == 0 {
		c.HousekeepingPeriod = 2 * time.Second
	}
	if c.HealthyThreshold == 0 {
		c.HealthyThreshold = 5 * time.Minute
	}
	if c.HousekeepingIdlePeriod == 0 {
		c.HousekeepingIdlePeriod = min(time.Minute, c.HealthyThreshold/2)
	}
	if c.SyncPeriod < 0 || c.HousekeepingPeriod < 0 || c.HealthyThreshold < 0 || c.HousekeepingIdlePeriod < 0 {
		return errors.New("syncloop: periods must be positive")
	}
	if c.HousekeepingIdlePeriod > c.HealthyThreshold/2 {
		return fmt.Errorf("syncloop: HousekeepingIdlePeriod %s is over half of HealthyThreshold %s", c.HousekeepingIdlePeriod, c.HealthyThreshold)
	}
	for i, ch := range c.Extra {
		if ch.C == nil {
			return fmt.Errorf("syncloop: extra channel %d (%q) is nil", i, ch.Name)
		}
	}
	return nil
}

// Healthy returns an error wrapping ErrNotHealthy when the loop is not
// running or has not completed an iteration within the threshold; usable as
// a /healthz check.
func (l *Loop) Healthy() error {
	if !l.running.Load() {
		return fmt.Errorf("%w: not running", ErrNotHealthy)
	}
	last := time.Unix(0, l.lastIteration.Load())
	if since := time.Since(last); since > l.cfg.HealthyThreshold {
		return fmt.Errorf("%w: last iteration %s ago, threshold %s", ErrNotHealthy, since.Round(time.Second), l.cfg.HealthyThreshold)
	}
	return nil
}

// extraMsg is a value received on an extra channel.
type extraMsg struct {
	name string
	uids []types.UID
}

// Run runs the loop until ctx ends. It returns nil then, after its
// goroutines have exited, or an error when the configuration channel closes.
func (l *Loop) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("syncloop: Run called twice")
	}
	defer l.running.Store(false)
	l.lastIteration.Store(time.Now().UnixNano())

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// Extra channels of any number fan in to one channel.
	var extra chan extraMsg
	if len(l.cfg.Extra) > 0 {
		extra = make(chan extraMsg)
		for _, ch := range l.cfg.Extra {
			wg.Go(func() { forward(ctx, ch, extra) })
		}
	}

	var woken <-chan struct{}
	if w, ok := l.cfg.Work.(WokenQueue); ok {
		woken = w.Woken()
	}
	ticks := newSyncTicks(l.cfg.Work, l.cfg.SyncPeriod)
	defer ticks.stop()
	l.housekeeping = time.NewTicker(l.cfg.HousekeepingPeriod)
	defer l.housekeeping.Stop()
	l.settler, _ = l.h.(HousekeepingSettler)
	l.settled = false
	l.due = time.NewTimer(time.Hour)
	l.due.Stop()
	defer l.due.Stop()

	const (
		backOffBase = 100 * time.Millisecond
		backOffMax  = 5 * time.Second
	)
	backOff := backOffBase
	for {
		if l.cfg.RuntimeHealthy != nil {
			if err := l.cfg.RuntimeHealthy(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// A blip (the first relist not done yet at start-up) is
				// not worth an error; an outage that lasts is.
				if backOff >= time.Second {
					l.errs.Error(err, "Runtime not healthy, skipping sync loop iteration", "backOff", backOff)
				} else {
					l.log.V(1).Info("Runtime not healthy, skipping sync loop iteration", "err", err, "backOff", backOff)
				}
				if !sleep(ctx, backOff) {
					return nil
				}
				backOff = min(2*backOff, backOffMax)
				l.errs.Flush()
				continue
			}
			backOff = backOffBase
		}
		cont, err := l.iteration(ctx, ticks.arm(), ticks.earlier, woken, l.housekeeping.C, extra)
		if err != nil {
			return err
		}
		if !cont {
			return nil
		}
		l.lastIteration.Store(time.Now().UnixNano())
	}
}

// syncTicks are the loop's sync ticks: a ticker, or with a DueQueue, a
// timer armed for the first tick (on the grid of a ticker started with
// the loop) at or after the earliest pod is due, none when none is
// queued. Only the loop's goroutine uses them.
type syncTicks struct {
	period time.Duration
	ticker *time.Ticker
	due    DueQueue
	// earlier is the DueQueue's Earlier, nil without one.
	earlier <-chan struct{}
	start   time.Time
	timer   *time.Timer
	// armedAt is when timer fires, zero when it is stopped.
	armedAt time.Time
}

func newSyncTicks(work WorkQueue, period time.Duration) *syncTicks {
	t := &syncTicks{period: period, start: time.Now()}
	if d, ok := work.(DueQueue); ok {
		t.due, t.earlier = d, d.Earlier()
		t.timer = time.NewTimer(period)
		t.timer.Stop()
		return t
	}
	t.ticker = time.NewTicker(period)
	return t
}

// arm returns the channel of the next sync tick, nil when no pod is due.
func (t *syncTicks) arm() <-chan time.Time {
	if t.due == nil {
		return t.ticker.C
	}
	next, ok := t.due.NextDue()
	if !ok {
		if !t.armedAt.IsZero() {
			t.timer.Stop()
			t.armedAt = time.Time{}
		}
		return nil
	}
	now := time.Now()
	// The first tick at or after next; a tick that passed while the loop
	// did something else fires at once, as a ticker's pending tick would.
	k := (next.Sub(t.start) + t.period - 1) / t.period
	at := t.start.Add(k * t.period)
	if at.Before(now) {
		at = now
	}
	if !at.Equal(t.armedAt) || !t.armedAt.After(now) {
		t.timer.Reset(at.Sub(now))
		t.armedAt = at
	}
	return t.timer.C
}

func (t *syncTicks) stop() {
	if t.ticker != nil {
		t.ticker.Stop()
	}
	if t.timer != nil {
		t.timer.Stop()
	}
}

func forward(ctx context.Context, ch Channel, out chan<- extraMsg) {
	for {
		select {
		case <-ctx.Done():
			return
		case uids, ok := <-ch.C:
			if !ok {
				return
			}
			select {
			case out <- extraMsg{name: ch.Name, uids: uids}:
			case <-ctx.Done():
				return
			}
		}
	}
}

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

// iteration waits for one message and handles it. It reports false when
// ctx ended.
func (l *Loop) iteration(ctx context.Context, syncCh <-chan time.Time, earlier, woken <-chan struct{}, housekeepingCh <-chan time.Time, extra <-chan extraMsg) (bool, error) {
	// tick: this iteration was a housekeeping tick; idle: it handled
	// nothing (a sync tick with no work due); any other message ends a
	// settled spell.
	tick, idle := false, false
	defer func() {
		switch {
		case ctx.Err() != nil, idle:
		case tick:
			l.settle()
		default:
			l.unsettle()
		}
	}()
	select {
	case <-ctx.Done():
		return false, nil

	case <-earlier:
		// A pod is due sooner: the next iteration's sync tick is armed
		// for it.

	case u, ok := <-l.cfg.Updates:
		if !ok {
			return false, errors.New("syncloop: configuration channel closed")
		}
		l.handleUpdate(ctx, u)

	case e := <-l.cfg.PLEG:
		if e.Type != pleg.ContainerRemoved {
			if pod, ok := l.cfg.Pods.GetPodByUID(e.ID); ok {
				l.log.V(4).Info("Pod lifecycle event", "podUID", e.ID, "event", e.Type, "containerID", e.Data)
				l.h.HandlePodSyncs(ctx, []*v1.Pod{pod})
			} else {
				l.log.V(4).Info("Pod lifecycle event for an unknown pod", "podUID", e.ID, "event", e.Type)
			}
		}

	case <-syncCh:
		idle = !l.syncWork(ctx)
	case <-woken:
		idle = !l.syncWork(ctx)

	case u := <-l.cfg.Liveness:
		// Only a failure needs the pod synced (to restart the container).
		if u.Result == probe.Failure {
			l.syncProbed(ctx, u, "liveness")
		}
	case u := <-l.cfg.Readiness:
		l.syncProbed(ctx, u, "readiness")
	case u := <-l.cfg.Startup:
		l.syncProbed(ctx, u, "startup")

	case m := <-extra:
		if pods := l.pods(m.uids); len(pods) > 0 {
			l.log.V(4).Info("Sync requested", "channel", m.name, "pods", len(pods))
			l.h.HandlePodSyncs(ctx, pods)
		}

	case <-housekeepingCh:
		tick = true
		l.housekeep(ctx)
	case <-l.cfg.HousekeepingDue:
		// Run at once when it may, else once it may (unless a tick comes
		// first): the earliest of a quarter period after the last pass
		// began and the end of its rest.
		if l.dueArmed {
			break
		}
		at := l.lastPass.Add(l.cfg.HousekeepingPeriod / 4)
		if l.restUntil.After(at) {
			at = l.restUntil
		}
		if d := time.Until(at); d > 0 {
			l.due.Reset(d)
			l.dueArmed = true
			break
		}
		l.housekeep(ctx)
	case <-l.dueC():
		l.dueArmed = false
		l.housekeep(ctx)
	}
	return true, nil
}

// settle slows the housekeeping ticks to HousekeepingIdlePeriod when the
// handler says a pass would find nothing to do: an idle agent's loop then
// wakes once a period rather than every 2 s.
// A pass at an idle tick that leaves work (a failure) brings the ticks
// back to HousekeepingPeriod.
func (l *Loop) settle() {
	if l.settler == nil || l.housekeeping == nil {
		return
	}
	if !l.settler.HousekeepingSettled() {
		l.unsettle()
		return
	}
	if !l.settled {
		l.settled = true
		l.housekeeping.Reset(l.cfg.HousekeepingIdlePeriod)
	}
}

// unsettle brings the housekeeping ticks back to HousekeepingPeriod, the
// first a period from now, after a message that may have made work for
// housekeeping.
func (l *Loop) unsettle() {
	if !l.settled {
		return
	}
	l.settled = false
	l.housekeeping.Reset(l.cfg.HousekeepingPeriod)
}

// dueC is the channel of the timer of a pass HousekeepingDue asked for;
// nil when none is set.
func (l *Loop) dueC() <-chan time.Time {
	if !l.dueArmed {
		return nil
	}
	return l.due.C
}

// housekeep runs a housekeeping pass, unless the sources are not ready or
// housekeeping rests after a long pass.
func (l *Loop) housekeep(ctx context.Context) {
	if l.cfg.SourcesReady != nil && !l.cfg.SourcesReady() {
		l.log.V(4).Info("Sources not ready, skipping housekeeping")
		return
	}
	start := time.Now()
	if start.Before(l.restUntil) {
		l.log.V(4).Info("Housekeeping resting after a long pass", "until", l.restUntil)
		return
	}
	// This pass does what one asked for would.
	if l.dueArmed {
		l.due.Stop()
		l.dueArmed = false
	}
	l.lastPass = start
	if err := l.h.HandlePodCleanups(ctx); err != nil {
		l.errs.Error(err, "Housekeeping failed")
	}
	l.errs.Flush()
	end := time.Now()
	d := end.Sub(start)
	l.restUntil = end.Add(min(housekeepingRest*d, l.cfg.HousekeepingPeriod))
	if d > time.Second {
		l.log.Info("Housekeeping took longer than expected", "expected", time.Second, "actual", d.Round(time.Millisecond))
	}
}

func (l *Loop) handleUpdate(ctx context.Context, u sources.PodUpdate) {
	l.log.V(2).Info("Pod configuration update", "op", u.Op, "source", u.Source, "pods", len(u.Pods))
	switch u.Op {
	case sources.Add:
		l.h.HandlePodAdditions(ctx, u.Pods)
	case sources.Update, sources.Delete:
		l.h.HandlePodUpdates(ctx, u.Pods)
	case sources.Remove:
		l.h.HandlePodRemoves(ctx, u.Pods)
	case sources.Reconcile:
		l.h.HandlePodReconcile(ctx, u.Pods)
	default:
		l.log.Error(fmt.Errorf("syncloop: unknown operation %d", int(u.Op)), "Ignoring pod configuration update", "source", u.Source)
	}
}

// syncWork syncs the pods whose work is due; false when none was.
func (l *Loop) syncWork(ctx context.Context) bool {
	if l.cfg.Work == nil {
		return false
	}
	pods := l.pods(l.cfg.Work.GetWork())
	if len(pods) > 0 {
		l.h.HandlePodSyncs(ctx, pods)
	}
	return len(pods) > 0
}

func (l *Loop) syncProbed(ctx context.Context, u probe.Update, kind string) {
	if pod, ok := l.cfg.Pods.GetPodByUID(u.PodUID); ok {
		l.log.V(4).Info("Probe result changed", "probe", kind, "podUID", u.PodUID, "containerID", u.ContainerID, "result", u.Result)
		l.h.HandlePodSyncs(ctx, []*v1.Pod{pod})
	}
}

func (l *Loop) pods(uids []types.UID) []*v1.Pod {
	if len(uids) == 0 {
		return nil
	}
	pods := make([]*v1.Pod, 0, len(uids))
	for _, uid := range uids {
		if pod, ok := l.cfg.Pods.GetPodByUID(uid); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}
