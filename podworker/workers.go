package podworker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/logagg"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
)

// PodWorkerState is a pod's state as its worker sees it.
type PodWorkerState int

// The states, as the kubelet names them.
const (
	// SyncPod: the pod should run; SyncPod is called.
	SyncPod PodWorkerState = iota
	// TerminatingPod: the pod must stop; containers may still run.
	TerminatingPod
	// TerminatedPod: no container runs; what the pod held is being (or
	// was) released.
	TerminatedPod
)

func (s PodWorkerState) String() string {
	switch s {
	case SyncPod:
		return "sync"
	case TerminatingPod:
		return "terminating"
	case TerminatedPod:
		return "terminated"
	}
	return "unknown"
}

// PodWorkerSync summarizes one worker for SyncKnownPods.
type PodWorkerSync struct {
	// State of the pod.
	State PodWorkerState
	// Orphan: the pod is not in the desired set given to SyncKnownPods.
	Orphan bool
	// HasConfig: the worker holds a pod object (not only a RunningPod).
	HasConfig bool
	// Static: the pod object came from a source other than the API server.
	Static bool
}

// Options configure Workers.
type Options struct {
	// Cache holds each pod's runtime status; a worker reads it before
	// every sync. Required.
	Cache pleg.Cache
	// Queue receives each pod's next due time after a sync; the sync loop
	// reads it. Required.
	Queue *Queue
	// ResyncInterval is how long after a successful SyncPod the pod is due
	// again, plus up to 50% jitter. Defaults to 1m.
	ResyncInterval time.Duration
	// BackOffPeriod is how long after a failed sync the pod is due again,
	// plus up to 50% jitter. Defaults to 10s.
	BackOffPeriod time.Duration
	// Terminated, when set, is told of each pod whose containers are known
	// stopped for good: its SyncTerminatingPod (or the runtime pod's kill)
	// succeeded, it never started, or it was already stopped when first
	// seen. Called once per pod, without the workers' lock held. The agent
	// passes the status manager's PodTerminated. Defaults to none.
	Terminated func(uid types.UID)
	// Logger receives the workers' logs. Defaults to discarding them.
	Logger logr.Logger
	// OnSync, when set, is told how long each call of a sync function
	// took, by the kubelet's operation names: the update type for
	// SyncPod ("create", "update", "sync"), "kill" for
	// SyncTerminatingPod and SyncTerminatingRuntimePod, "terminated" for
	// SyncTerminatedPod (kubelet_pod_worker_duration_seconds). It must
	// not block. Defaults to nil: none.
	OnSync func(operation string, d time.Duration)
}

// The defaults, the kubelet's.
const (
	DefaultResyncInterval = time.Minute
	DefaultBackOffPeriod  = 10 * time.Second
)

// jitterFactor is the kubelet's worker jitter: a delay d becomes a random
// value in [d, 1.5d).
const jitterFactor = 0.5

func (o Options) withDefaults() (Options, error) {
	if o.Cache == nil {
		return o, errors.New("podworker: Options.Cache is required")
	}
	if o.Queue == nil {
		return o, errors.New("podworker: Options.Queue is required")
	}
	if o.ResyncInterval < 0 || o.BackOffPeriod < 0 {
		return o, errors.New("podworker: ResyncInterval and BackOffPeriod must not be negative")
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.BackOffPeriod == 0 {
		o.BackOffPeriod = DefaultBackOffPeriod
	}
	o.Logger = o.Logger.WithName("podworker")
	return o, nil
}

// Workers gives every pod UID its own goroutine that calls SyncFuncs, the
// kubelet's pod workers, while the pod has work. It is safe for concurrent use. It lives from New
// until its Run returns; after that it accepts no update.
type Workers struct {
	sync SyncFuncs
	opts Options
	log  logr.Logger
	// errs aggregates the failed syncs of each pod, which recur on every
	// retry while the failure lasts: the first logged, then one line a
	// minute per pod with the count of those not logged.
	errs *logagg.Aggregator

	mu     sync.Mutex
	pods   map[types.UID]*worker
	static staticNames
	// synced: SyncKnownPods ran once, so every pod on the node is known.
	synced bool
	// runCtx is Run's context; nil before Run.
	runCtx context.Context
	// syncParent, made from runCtx, is the parent of the contexts of the
	// syncs in flight, which syncs counts; the last one to end cancels it
	// (syncParentCancel) and the next sync makes another. A context from
	// context.WithCancel keeps its children in a map that gives back none
	// of the room it grew to, and a churn of pods has a sync in flight for
	// every pod at once: runCtx (the agent's) holds one child at a time.
	syncParent       context.Context
	syncParentCancel context.CancelFunc
	syncs            int
	// stopped: Run's context ended; no worker starts any more.
	stopped bool
	wg      sync.WaitGroup
	// ends counts the pods that terminated, finished or were forgotten
	// (see Terminations).
	ends atomic.Uint64
	// ended receives a value when ends grew other than in SyncKnownPods
	// (see Ended).
	ended chan struct{}
}

// worker is the shell around one podState. Every pod on the node holds
// one, so it is a single allocation: the state lives inside it, and the
// wake-up is a flag under Workers.mu rather than a channel.
type worker struct {
	state podState
	// cancel stops the sync in flight; nil between syncs.
	cancel context.CancelFunc
	// lastSync is when the previous sync returned: the status of the next
	// one must be newer. Only the worker's goroutine touches it.
	lastSync time.Time
	// woken: an update is pending for the goroutine; the update itself is
	// state.pending, which a newer one replaces. Guarded by Workers.mu.
	woken bool
	// running: its goroutine runs. The goroutine ends when no wake-up is
	// pending; the next wake-up starts another (wakeLocked). Guarded by
	// Workers.mu.
	running bool
}

// New returns pod workers that call sync. It starts nothing; Run does.
func New(sync SyncFuncs, opts Options) (*Workers, error) {
	if sync == nil {
		return nil, errors.New("podworker: sync funcs are required")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Workers{
		sync:  sync,
		opts:  opts,
		log:   opts.Logger,
		errs:  logagg.New(opts.Logger, logagg.Options{}),
		pods:  map[types.UID]*worker{},
		ended: make(chan struct{}, 1),
	}, nil
}

// Run starts the workers of the pods already updated and every later one,
// and blocks until ctx ends. Then it cancels the syncs in flight and
// returns nil once every worker goroutine exited. Ending Run stops the
// workers, not the pods: nothing is killed, so an agent that restarts finds
// its pods running. Run must be called once.
func (w *Workers) Run(ctx context.Context) error { return run.Until(ctx, w) }

// Start is Run without waiting for ctx to end (run.Starter): Workers hold
// no goroutine but their pods' workers.
func (w *Workers) Start(ctx context.Context) (wait func(), err error) {
	w.mu.Lock()
	if w.runCtx != nil {
		w.mu.Unlock()
		return nil, errors.New("podworker: Run called more than once")
	}
	w.runCtx = ctx
	for uid, wk := range w.pods {
		w.startLocked(uid, wk)
	}
	w.mu.Unlock()
	return func() {
		<-ctx.Done()
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		w.wg.Wait()
	}, nil
}

// UpdatePod hands an update to the pod's worker, starting the worker for a
// UID seen for the first time. It never blocks on a sync: when the worker
// is busy the update waits, and a newer update replaces it.
//
// An update before Run is kept and its worker starts when Run starts.
// After Run's context ended the update is dropped (logged at V(4)).
func (w *Workers) UpdatePod(opts UpdateOptions) {
	opts, uid, reason := normalize(opts)
	if reason != "" {
		w.log.V(1).Info("Ignoring pod update", "podUID", uid, "updateType", opts.UpdateType, "reason", reason)
		return
	}
	now := time.Now()

	// Runs after the unlock below.
	var terminated bool
	defer func() {
		if terminated {
			w.terminated(uid)
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		w.log.V(4).Info("Ignoring pod update after the workers stopped", "pod", ref(opts), "podUID", uid, "updateType", opts.UpdateType)
		return
	}
	wk, ok := w.pods[uid]
	if !ok {
		stopped := false
		if opts.Pod != nil && terminalPhase(opts.Pod) {
			st, err := w.opts.Cache.Get(uid)
			stopped = err == nil && runtimeStopped(st)
		}
		wk = &worker{}
		wk.state.init(uid, opts, stopped, now)
		w.pods[uid] = wk
		terminated = wk.state.terminated()
		if wk.state.static {
			w.static.wait(wk.state.fullName, uid)
		}
		w.log.V(4).Info("Pod worker created", "pod", ref(opts), "podUID", uid, "state", wk.state.phase())
	}
	wasTerminating := wk.state.terminationRequested()
	wasEnded := ok && (wk.state.terminated() || wk.state.finished)
	r := wk.state.update(opts, !ok, now)
	if ended := wk.state.terminated() || wk.state.finished; ended != wasEnded {
		w.end()
	}
	closeAll(r.completed)
	if r.ignored != "" {
		w.log.V(4).Info("Ignoring pod update", "pod", ref(opts), "podUID", uid, "updateType", opts.UpdateType, "reason", r.ignored)
		return
	}
	if !wasTerminating && wk.state.terminationRequested() {
		w.log.V(1).Info("Pod is terminating", "pod", ref(opts), "podUID", uid, "updateType", opts.UpdateType, "gracePeriod", wk.state.gracePeriod)
	}
	if r.wake {
		notify(wk)
	}
	if r.cancel && wk.cancel != nil {
		w.log.V(3).Info("Cancelling pod sync", "pod", ref(opts), "podUID", uid)
		wk.cancel()
	}
	w.startLocked(uid, wk)
}

// wakeLocked queues a wake-up for the worker and starts its goroutine if
// none runs.
func (w *Workers) wakeLocked(uid types.UID, wk *worker) {
	notify(wk)
	w.startLocked(uid, wk)
}

// startLocked starts the worker goroutine if Run runs and it is not
// running.
func (w *Workers) startLocked(uid types.UID, wk *worker) {
	if w.runCtx == nil || w.stopped || wk.running || wk.state.finished {
		return
	}
	wk.running = true
	w.wg.Add(1)
	go w.loop(w.runCtx, uid, wk)
}

// loop is one pod's goroutine: one sync per wake-up, until no wake-up is
// pending, the pod finished, the UID was forgotten, or Run's context
// ended. An idle pod has no goroutine: its next wake-up starts one.
func (w *Workers) loop(ctx context.Context, uid types.UID, wk *worker) {
	defer w.wg.Done()
	for {
		if ctx.Err() != nil {
			return
		}
		// Wake-ups are queued under w.mu: one queued before this check
		// is taken here, and one queued after the unlock starts a new
		// goroutine.
		w.mu.Lock()
		woken := wk.woken
		wk.woken = false
		if !woken {
			wk.running = false
		}
		w.mu.Unlock()
		if !woken || w.step(uid, wk, &wk.lastSync) {
			return
		}
	}
}

// step takes the pending update, makes the call, and records its result.
// It returns true when the worker is done.
func (w *Workers) step(uid types.UID, wk *worker, lastSync *time.Time) (exit bool) {
	w.mu.Lock()
	if w.pods[uid] != wk {
		w.mu.Unlock()
		return true
	}
	s := &wk.state
	wasTerminated := s.terminated()
	mayStart := true
	if s.needsStartGate() {
		mayStart = w.static.allow(s.fullName, uid, w.eligibleLocked)
	}
	wrk, completed := s.take(mayStart, time.Now())
	switch wrk.kind {
	case workNone:
		w.mu.Unlock()
		return false
	case workWait:
		w.mu.Unlock()
		w.log.V(4).Info("Static pod waits for its full name", "pod", s.fullName, "podUID", uid)
		return false
	case workDrop:
		closeAll(completed)
		w.releaseLocked(s)
		w.end()
		w.mu.Unlock()
		if !wasTerminated {
			w.terminated(uid)
		}
		w.log.V(1).Info("Static pod stopped before it started", "pod", s.fullName, "podUID", uid)
		return true
	}
	syncCtx, cancel := context.WithCancel(w.syncStartLocked())
	wk.cancel = cancel
	w.mu.Unlock()

	res := w.call(syncCtx, uid, wrk, lastSync)
	res.cancelled = res.err != nil && syncCtx.Err() != nil
	cancel()

	w.mu.Lock()
	w.syncEndLocked()
	wk.cancel = nil
	wasFinished := s.finished
	c := s.complete(wrk, res, time.Now())
	// A terminating or terminated pod's failed step counts too: for a pod
	// no longer in the config, housekeeping (SyncKnownPods) is what
	// retries it.
	failedEnd := c.requeue == requeueBackOff && wrk.kind != workSync
	if (!wasTerminated && s.terminated()) || (!wasFinished && s.finished) || c.forget || failedEnd {
		w.end()
	}
	closeAll(c.completed)
	if c.exit {
		w.releaseLocked(s)
	}
	if c.forget {
		delete(w.pods, uid)
		w.opts.Queue.remove(uid)
		w.shrinkLocked()
	}
	if c.wake {
		notify(wk)
	}
	becameTerminated := !wasTerminated && s.terminated()
	w.mu.Unlock()
	if becameTerminated {
		w.terminated(uid)
	}

	podRef := ref(UpdateOptions{Pod: wrk.pod, RunningPod: wrk.runningPod})
	switch {
	case res.cancelled:
		w.log.V(2).Info("Pod sync cancelled", "pod", podRef, "podUID", uid, "work", wrk.kind)
	case res.err != nil:
		w.errs.ErrorFor(string(uid), res.err, "Pod sync failed", "pod", podRef, "podUID", uid, "work", wrk.kind)
	case wrk.kind == workTerminating:
		w.log.V(1).Info("Pod terminated", "pod", podRef, "podUID", uid)
	case wrk.kind == workTerminated, wrk.kind == workTerminatingRuntime:
		w.log.V(1).Info("Pod worker finished", "pod", podRef, "podUID", uid)
	case res.isTerminal:
		w.log.V(1).Info("Pod is terminal", "pod", podRef, "podUID", uid)
	}
	switch c.requeue {
	case requeueResync:
		w.opts.Queue.Enqueue(uid, jitter(w.opts.ResyncInterval, rand.Float64()))
	case requeueBackOff:
		w.opts.Queue.Enqueue(uid, jitter(w.opts.BackOffPeriod, rand.Float64()))
	}
	if c.requeue != requeueNone {
		// Forgotten meanwhile (SyncKnownPods): not due any more.
		w.mu.Lock()
		gone := w.pods[uid] != wk
		w.mu.Unlock()
		if gone {
			w.opts.Queue.remove(uid)
		}
	}
	return c.exit
}

// call reads the pod's runtime status and calls the sync function for w.
// The status is newer than the end of the worker's previous sync, so the
// worker never acts on a status that predates its own last action.
// newerStatus waits for a status of the pod read after lastSync, as
// call's syncs do; for a sync, no later than the pod's wake-up (its
// deadline): a wake-up that comes while the worker waits here would
// otherwise be acted on only at the next refresh of the cache, seconds
// late. The sync then takes the status held.
func (w *Workers) newerStatus(ctx context.Context, uid types.UID, kind workKind, lastSync time.Time) (*runtime.PodStatus, error) {
	at, ok := w.opts.Queue.wakeTime(uid)
	if kind != workSync || !ok {
		return w.opts.Cache.GetNewerThan(ctx, uid, lastSync)
	}
	wctx, cancel := context.WithDeadline(ctx, at)
	defer cancel()
	status, err := w.opts.Cache.GetNewerThan(wctx, uid, lastSync)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		w.opts.Queue.takeFired(uid)
		return w.opts.Cache.Get(uid)
	}
	return status, err
}

func (w *Workers) call(ctx context.Context, uid types.UID, wrk work, lastSync *time.Time) result {
	if wrk.kind == workTerminatingRuntime {
		start := time.Now()
		err := w.sync.SyncTerminatingRuntimePod(ctx, wrk.runningPod)
		*lastSync = time.Now()
		w.observe(SyncPodKill.String(), start, *lastSync)
		return result{err: err}
	}
	var status *runtime.PodStatus
	var err error
	if wrk.kind == workSync && w.opts.Queue.takeFired(uid) {
		// A sync due at a time (a deadline), not because the runtime
		// changed: the status held is as new as the worker's last
		// action, and waiting for the next refresh would act late.
		status, err = w.opts.Cache.Get(uid)
	} else {
		status, err = w.newerStatus(ctx, uid, wrk.kind, *lastSync)
	}
	if err != nil {
		return result{err: err}
	}
	var r result
	start := time.Now()
	var op string
	switch wrk.kind {
	case workSync:
		op = wrk.updateType.String()
		r.isTerminal, r.err = w.sync.SyncPod(ctx, wrk.updateType, wrk.pod, status)
	case workTerminating:
		op = SyncPodKill.String()
		r.err = w.sync.SyncTerminatingPod(ctx, wrk.pod, status, wrk.gracePeriod, wrk.statusFn)
	case workTerminated:
		op = "terminated"
		r.err = w.sync.SyncTerminatedPod(ctx, wrk.pod, status)
	}
	*lastSync = time.Now()
	w.observe(op, start, *lastSync)
	return r
}

// observe reports a sync's duration to Options.OnSync.
func (w *Workers) observe(op string, start, end time.Time) {
	if w.opts.OnSync != nil && op != "" {
		w.opts.OnSync(op, end.Sub(start))
	}
}

// eligibleLocked reports whether a static pod waiting for its full name
// can still start.
func (w *Workers) eligibleLocked(uid types.UID) bool {
	wk, ok := w.pods[uid]
	return ok && !wk.state.terminationRequested()
}

// syncStartLocked counts a sync in flight and returns the parent of its
// context: syncParent, made from Run's context when no sync was in flight.
func (w *Workers) syncStartLocked() context.Context {
	if w.syncs == 0 {
		w.syncParent, w.syncParentCancel = context.WithCancel(w.runCtx)
	}
	w.syncs++
	return w.syncParent
}

// syncEndLocked counts the end of a sync; the last one in flight cancels
// syncParent, which has no child left then, so that Run's context forgets
// it.
func (w *Workers) syncEndLocked() {
	w.syncs--
	if w.syncs == 0 {
		w.syncParentCancel()
		w.syncParent, w.syncParentCancel = nil, nil
	}
}

// shrinkLocked makes the map of workers anew once it is empty: a map
// gives back none of the room it grew to as it empties, and a churn of
// pods grows it to every pod in flight at once.
func (w *Workers) shrinkLocked() {
	if len(w.pods) == 0 {
		w.pods = make(map[types.UID]*worker)
	}
}

// releaseLocked frees a static pod's full name and wakes the pods waiting
// for it.
func (w *Workers) releaseLocked(s *podState) {
	if !s.static {
		return
	}
	for _, uid := range w.static.release(s.fullName, s.uid) {
		if wk, ok := w.pods[uid]; ok && wk.state.pending != nil {
			w.wakeLocked(uid, wk)
		}
	}
}

// SyncKnownPods reconciles the workers with the pods that should be on the
// node, and returns the state of every worker it keeps. A worker whose pod
// is not in desired and that finished is forgotten, as is one whose UID was
// created again while it terminated: the UID can start afresh with a new
// UpdatePod. A pod not in desired that still runs is reported as an Orphan
// and the workers terminate it themselves (from its last known pod object),
// cancelling the sync in flight; one that never started is forgotten.
//
// A desired pod missing from the returned map has no worker: send it an
// UpdatePod. After the first call, the queries answer for unknown UIDs
// that nothing runs.
func (w *Workers) SyncKnownPods(desired []*v1.Pod) map[types.UID]PodWorkerSync {
	w.errs.Flush() // housekeeping calls this on each pass
	want := make(map[types.UID]bool, len(desired))
	for _, pod := range desired {
		want[pod.UID] = true
	}
	now := time.Now()

	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced = true
	out := make(map[types.UID]PodWorkerSync, len(w.pods))
	for uid, wk := range w.pods {
		k := wk.state.reconcile(want[uid], now)
		closeAll(k.completed)
		if k.remove {
			w.ends.Add(1)
			// A goroutine still running sees the UID gone in step
			// and exits.
			delete(w.pods, uid)
			w.opts.Queue.remove(uid)
			w.shrinkLocked()
			w.releaseLocked(&wk.state)
			w.log.V(4).Info("Pod worker forgotten", "pod", wk.state.name(), "podUID", uid)
			continue
		}
		if k.wake {
			w.wakeLocked(uid, wk)
		}
		if k.cancel && wk.cancel != nil {
			wk.cancel()
		}
		if k.cancel {
			w.log.V(1).Info("Pod left the config, terminating", "pod", wk.state.name(), "podUID", uid)
		}
		out[uid] = wk.state.sync(!want[uid])
	}
	return out
}

// end counts a pod that terminated, finished or failed a step of its
// termination, and tells Ended.
func (w *Workers) end() {
	w.ends.Add(1)
	select {
	case w.ended <- struct{}{}:
	default:
	}
}

// Ended receives a value after Terminations grew, other than in
// SyncKnownPods (housekeeping, which knows): a pod's containers stopped
// for good, its worker finished, or a step of its termination failed.
// Values do not queue: one stands for every change since the last was
// received. The agent passes it to the sync loop
// (syncloop.Config.HousekeepingDue), so that housekeeping releases a
// finished pod's runtime objects and state at once rather than at its
// next tick.
func (w *Workers) Ended() <-chan struct{} { return w.ended }

// Terminations returns how many times so far a pod's worker saw the
// pod's containers stopped for good, finished, was forgotten, or failed a
// step of its termination (to be retried). It grows with every change
// that takes a pod out of the active pods or lets housekeeping clean up
// after it or retry it, and with nothing else: a caller that computed
// something from the workers' states can tell cheaply that it still
// holds.
func (w *Workers) Terminations() uint64 { return w.ends.Load() }

// IsPodKnownTerminated reports whether the pod is known and every
// container stopped (SyncTerminatingPod returned nil). An unknown pod is
// not known terminated: use it to filter the desired set (admission), not
// for cleanup.
func (w *Workers) IsPodKnownTerminated(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return isPodKnownTerminated(w.stateLocked(uid))
}

// CouldHaveRunningContainers reports whether containers of the pod may
// run: true for a known pod until it terminated, and for an unknown one
// until SyncKnownPods ran once.
func (w *Workers) CouldHaveRunningContainers(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return couldHaveRunningContainers(w.stateLocked(uid), w.synced)
}

// ShouldPodContainersBeTerminating reports whether no container of the pod
// may start any more: true once its worker saw the termination request,
// and for an unknown pod once SyncKnownPods ran.
func (w *Workers) ShouldPodContainersBeTerminating(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return shouldPodContainersBeTerminating(w.stateLocked(uid), w.synced)
}

// IsPodTerminationRequested reports whether the known pod was asked to
// stop (its containers may still be starting). It is false for an unknown
// pod; cleanup loops use ShouldPodContainersBeTerminating.
func (w *Workers) IsPodTerminationRequested(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return isPodTerminationRequested(w.stateLocked(uid))
}

// ShouldPodRuntimeBeRemoved reports whether what the pod's containers use
// (volumes, devices) can be torn down: true once it terminated, and for an
// unknown pod once SyncKnownPods ran.
func (w *Workers) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return shouldPodRuntimeBeRemoved(w.stateLocked(uid), w.synced)
}

// ShouldPodContentBeRemoved reports whether all of the pod's content can
// go: true for an evicted pod, for a deleted pod once it terminated, and
// for an unknown pod once SyncKnownPods ran.
func (w *Workers) ShouldPodContentBeRemoved(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return shouldPodContentBeRemoved(w.stateLocked(uid), w.synced)
}

// terminated calls Options.Terminated; w.mu is not held.
func (w *Workers) terminated(uid types.UID) {
	if w.opts.Terminated != nil {
		w.opts.Terminated(uid)
	}
}

func (w *Workers) stateLocked(uid types.UID) *podState {
	if wk, ok := w.pods[uid]; ok {
		return &wk.state
	}
	return nil
}

// notify queues a wake-up for the worker; a wake-up already queued covers
// this one. w.mu is held.
func notify(wk *worker) {
	wk.woken = true
}

func closeAll(chs []chan<- struct{}) {
	for _, ch := range chs {
		close(ch)
	}
}

// jitter returns d plus up to factor*d, r in [0, 1) choosing where (the
// kubelet's wait.Jitter).
func jitter(d time.Duration, r float64) time.Duration {
	return d + time.Duration(r*jitterFactor*float64(d))
}

// ref names the pod an update concerns, namespace/name.
func ref(opts UpdateOptions) string {
	switch {
	case opts.Pod != nil:
		return opts.Pod.Namespace + "/" + opts.Pod.Name
	case opts.RunningPod != nil:
		return opts.RunningPod.Namespace + "/" + opts.RunningPod.Name
	}
	return ""
}

func (k workKind) String() string {
	switch k {
	case workSync:
		return "sync"
	case workTerminating:
		return "terminating"
	case workTerminatingRuntime:
		return "terminatingRuntime"
	case workTerminated:
		return "terminated"
	case workWait:
		return "wait"
	case workDrop:
		return "drop"
	}
	return "none"
}
