package podworker

// This file is the core of the pod workers: the state of one pod UID and
// its transitions, as deterministic functions. They take no lock, read no
// clock (the time comes in as an argument), start nothing and call nothing;
// they return what the shell (workers.go) must do: wake the worker, cancel
// the sync in flight, close kill channels, requeue, exit.

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// podState is what the workers know about one pod UID. The phase is
// derived from the timestamps: syncing until terminatingAt is set,
// terminating until terminatedAt is set, then terminated; finished once
// SyncTerminatedPod returned nil.
type podState struct {
	uid types.UID
	// fullName, namespace/name, is kept for a static pod only: its
	// start waits for the name. Logs of other pods use name().
	fullName string

	// pending is the newest update the worker has not taken yet; a newer
	// update replaces it (the latest wins).
	pending *UpdateOptions
	// active is the update the worker last took: the pod as the worker
	// acts on it. Its KillPodOptions is always nil (kills live in kills).
	active *UpdateOptions

	// terminatingAt: termination was requested. Both times are Unix
	// nanoseconds (see stamp), 0 when not set: a third of a time.Time.
	terminatingAt int64
	// terminatedAt: SyncTerminatingPod returned nil; nothing runs.
	terminatedAt int64
	// gracePeriod in seconds, set once terminating; it only shrinks.
	gracePeriod int64

	// kills are the kill requests received while terminating, in order:
	// their status functions apply in order, their channels close when
	// the pod terminated.
	kills []KillPodOptions

	// The flags come last, together, so that the struct has no padding
	// between fields: every pod on the node holds one.

	static bool
	// started: the worker took an update and acted on the pod (a static
	// pod starts only once its full name is free).
	started bool
	// startedTerminating: the worker saw the request; SyncPod will not be
	// called again, so no new container can start.
	startedTerminating bool
	// finished: SyncTerminatedPod returned nil; the worker exited and the
	// UID ignores updates until SyncKnownPods forgets it.
	finished bool
	// deleted: the pod was deleted in the API server or left the config.
	deleted bool
	// evicted: the agent itself killed the pod with Evict.
	evicted bool
	// observedRuntime: a RunningPod kill showed the pod has containers.
	observedRuntime bool
	// restartRequested: a create for this UID arrived while it
	// terminated; SyncKnownPods forgets the UID once it finished so it
	// can start again.
	restartRequested bool
}

func (s *podState) terminationRequested() bool { return s.terminatingAt != 0 }
func (s *podState) terminated() bool           { return s.terminatedAt != 0 }

// stamp is t in Unix nanoseconds for terminatingAt and terminatedAt,
// never 0 (which means "not set").
func stamp(t time.Time) int64 {
	if n := t.UnixNano(); n != 0 {
		return n
	}
	return 1
}

// phase is the pod's state as the worker sees it.
func (s *podState) phase() PodWorkerState {
	switch {
	case s.terminated():
		return TerminatedPod
	case s.terminationRequested():
		return TerminatingPod
	}
	return SyncPod
}

// newPodState is the state of a UID seen for the first time. A pod whose
// phase is already Succeeded or Failed and whose runtime status shows
// nothing running (runtimeStopped) terminated during an earlier run of the
// agent: it starts terminated, so only SyncTerminatedPod is called, and it
// never counts as active.
func newPodState(uid types.UID, opts UpdateOptions, runtimeStopped bool, now time.Time) *podState {
	s := &podState{}
	s.init(uid, opts, runtimeStopped, now)
	return s
}

// init sets a zero podState to newPodState's result, in place: the shell
// keeps the state inside its worker, one allocation per pod.
func (s *podState) init(uid types.UID, opts UpdateOptions, runtimeStopped bool, now time.Time) {
	s.uid = uid
	switch {
	case opts.Pod != nil:
		s.static = podmodel.IsStatic(opts.Pod)
		if s.static {
			s.fullName = opts.Pod.Namespace + "/" + opts.Pod.Name
		}
		if terminalPhase(opts.Pod) && runtimeStopped {
			s.terminatingAt, s.terminatedAt, s.startedTerminating = stamp(now), stamp(now), true
		}
	}
}

// name is the pod's namespace/name, for logs.
func (s *podState) name() string {
	if s.fullName != "" {
		return s.fullName
	}
	if s.pending != nil {
		return ref(*s.pending)
	}
	if s.active != nil {
		return ref(*s.active)
	}
	return ""
}

// normalize checks an update and returns the pod UID it concerns; reason
// is set when the update must be dropped. A RunningPod alone is valid only
// with SyncPodKill; a RunningPod next to a Pod is dropped.
func normalize(opts UpdateOptions) (_ UpdateOptions, uid types.UID, reason string) {
	switch {
	case opts.Pod != nil:
		opts.RunningPod = nil
		return opts, opts.Pod.UID, ""
	case opts.RunningPod == nil:
		return opts, "", "update has neither Pod nor RunningPod"
	case opts.UpdateType != SyncPodKill:
		return opts, opts.RunningPod.ID, "a RunningPod can only be killed"
	}
	return opts, opts.RunningPod.ID, ""
}

// updateResult is what the shell does after podState.update.
type updateResult struct {
	// ignored, when set, says why the update was dropped.
	ignored string
	// wake: an update is pending for the worker.
	wake bool
	// cancel: the sync in flight must stop (the pod started terminating
	// or its grace period shrank).
	cancel bool
	// completed are kill channels to close now.
	completed []chan<- struct{}
}

// update records a new update (already normalized). first is true when the
// state was created for it.
func (s *podState) update(opts UpdateOptions, first bool, now time.Time) updateResult {
	var r updateResult
	kill := opts.KillPodOptions
	opts.KillPodOptions = nil
	drop := func(reason string) updateResult {
		// A kill that is dropped still gets an answer when nothing can
		// run any more.
		if kill != nil && kill.CompletedCh != nil && (s.terminated() || s.finished) {
			r.completed = append(r.completed, kill.CompletedCh)
		}
		r.ignored = reason
		return r
	}

	// A RunningPod carries no spec: when the pod is known, act on the pod
	// as known, but it was seen in the runtime and must be stopped.
	runtimeKill := opts.Pod == nil
	if runtimeKill {
		s.observedRuntime = true
		if known := s.knownPod(); known != nil {
			opts.Pod, opts.RunningPod = known, nil
		}
	}

	if !first && s.terminationRequested() && opts.UpdateType == SyncPodCreate {
		s.restartRequested = true
		return drop("pod is terminating; the UID can start again once SyncKnownPods forgot it")
	}
	if s.finished {
		return drop("pod worker finished; updates are ignored until SyncKnownPods forgets the UID")
	}

	pod := opts.Pod // nil for a kill of a pod known only from the runtime
	if pod != nil && pod.DeletionTimestamp != nil {
		s.deleted = true
	}
	became := false
	if !s.terminationRequested() {
		switch {
		case runtimeKill:
			s.deleted, became = true, true
		case pod.DeletionTimestamp != nil, terminalPhase(pod):
			became = true
		case opts.UpdateType == SyncPodKill:
			s.evicted = kill != nil && kill.Evict
			became = true
		}
		if became {
			s.terminatingAt = stamp(now)
		}
	}

	shortened := false
	switch {
	case s.terminated():
		// Housekeeping may see an older runtime listing of a pod that
		// stopped; its kill waits until the worker finished.
		if runtimeKill {
			return drop("pod terminated; a runtime kill waits until the worker finished")
		}
		if kill != nil && kill.CompletedCh != nil {
			r.completed = append(r.completed, kill.CompletedCh)
		}
	case s.terminationRequested():
		s.gracePeriod, shortened = effectiveGracePeriod(s.gracePeriod, pod, kill)
		if kill != nil {
			s.kills = append(s.kills, *kill)
		}
	default:
		// Kill options mean nothing to a pod that keeps running.
		if kill != nil && kill.CompletedCh != nil {
			r.completed = append(r.completed, kill.CompletedCh)
		}
	}

	s.pending = &opts
	r.wake = true
	r.cancel = became || shortened
	return r
}

// knownPod is the newest pod object the worker holds for the UID.
func (s *podState) knownPod() *v1.Pod {
	if s.pending != nil && s.pending.Pod != nil {
		return s.pending.Pod
	}
	if s.active != nil {
		return s.active.Pod
	}
	return nil
}

// workKind is what the worker does with the update it takes.
type workKind int

const (
	// workNone: nothing is pending.
	workNone workKind = iota
	// workWait: a static pod waits for its full name to be free; the
	// update stays pending.
	workWait
	// workDrop: a static pod stopped before it ever started; it is
	// finished without any sync.
	workDrop
	workSync
	workTerminating
	workTerminatingRuntime
	workTerminated
)

// work is one call the worker makes.
type work struct {
	kind        workKind
	updateType  UpdateType
	pod         *v1.Pod
	runningPod  *runtime.Pod
	gracePeriod int64
	statusFn    func(*v1.PodStatus)
}

// needsStartGate reports whether take must be told if the pod may start:
// a static pod that has not started and is not terminating waits for its
// full name.
func (s *podState) needsStartGate() bool {
	return s.pending != nil && !s.started && s.static && !s.terminationRequested()
}

// take moves the pending update to active and says what to call.
// mayStart answers the start gate (ignored unless needsStartGate).
func (s *podState) take(mayStart bool, now time.Time) (work, []chan<- struct{}) {
	u := s.pending
	if u == nil {
		return work{kind: workNone}, nil
	}
	if !s.started {
		switch {
		case s.static && s.terminationRequested() && !s.terminated() && !s.observedRuntime:
			// It never ran: nothing to stop.
			s.pending = nil
			s.terminatedAt, s.finished = stamp(now), true
			return work{kind: workDrop}, s.takeCompleted()
		case s.static && !s.terminationRequested() && !mayStart:
			return work{kind: workWait}, nil
		}
		s.started = true
	}
	// pending is held by nothing else (update and requeueActive make a
	// new one each time): it becomes active as it is.
	s.pending = nil
	s.active = u

	w := work{updateType: u.UpdateType, pod: u.Pod, runningPod: u.RunningPod}
	switch {
	case s.terminated():
		w.kind = workTerminated
	case s.terminationRequested():
		s.startedTerminating = true
		w.kind = workTerminating
		if w.pod == nil {
			w.kind = workTerminatingRuntime
		}
		w.gracePeriod = s.gracePeriod
		w.statusFn = s.statusFunc()
	default:
		w.kind = workSync
	}
	return w, nil
}

// statusFunc applies the status functions of every kill, in order.
func (s *podState) statusFunc() func(*v1.PodStatus) {
	var fns []func(*v1.PodStatus)
	for _, k := range s.kills {
		if k.PodStatusFunc != nil {
			fns = append(fns, k.PodStatusFunc)
		}
	}
	switch len(fns) {
	case 0:
		return nil
	case 1:
		return fns[0]
	}
	return func(st *v1.PodStatus) {
		for _, fn := range fns {
			fn(st)
		}
	}
}

// takeCompleted returns the kill channels not yet closed and forgets them.
func (s *podState) takeCompleted() []chan<- struct{} {
	var chs []chan<- struct{}
	for i := range s.kills {
		if ch := s.kills[i].CompletedCh; ch != nil {
			chs = append(chs, ch)
			s.kills[i].CompletedCh = nil
		}
	}
	return chs
}

// requeueActive makes the last update pending again, unless a newer one
// is: the next phase starts at once.
func (s *podState) requeueActive() {
	if s.pending == nil && s.active != nil {
		u := *s.active
		s.pending = &u
	}
}

// result is how a sync call ended.
type result struct {
	isTerminal bool
	err        error
	// cancelled: the call was cancelled (a kill, a shorter grace period
	// or the end of Run); a newer update is pending.
	cancelled bool
}

// requeue says when the pod is next due in the Queue.
type requeue int

const (
	requeueNone requeue = iota
	requeueResync
	requeueBackOff
)

// completion is what the shell does after podState.complete.
type completion struct {
	requeue requeue
	// wake: an update is pending, the worker runs again at once.
	wake bool
	// exit: the worker is done and its goroutine returns.
	exit bool
	// forget: the state goes too (a pod known only from the runtime).
	forget bool
	// completed are kill channels to close now.
	completed []chan<- struct{}
}

// complete records how the call for w ended.
func (s *podState) complete(w work, r result, now time.Time) completion {
	var c completion
	switch {
	case r.cancelled:
	case r.err != nil:
		c.requeue = requeueBackOff
	case w.kind == workTerminated:
		s.finished, s.pending = true, nil
		c.exit = true
		return c
	case w.kind == workTerminatingRuntime:
		s.terminatedAt, s.finished, s.pending = stamp(now), true, nil
		c.exit, c.forget = true, true
		c.completed = s.takeCompleted()
		return c
	case w.kind == workTerminating:
		s.terminatedAt = stamp(now)
		c.completed = s.takeCompleted()
		s.requeueActive()
	case r.isTerminal:
		// The pod ran to completion: stop it now.
		if !s.terminationRequested() {
			s.terminatingAt = stamp(now)
			s.gracePeriod, _ = effectiveGracePeriod(0, s.active.Pod, nil)
		}
		s.startedTerminating = true
		s.requeueActive()
	default:
		c.requeue = requeueResync
	}
	c.wake = s.pending != nil
	return c
}

// known is what SyncKnownPods does with one worker.
type known struct {
	// remove: forget the UID.
	remove bool
	// wake: the worker has a pending update (the pod left the config and
	// the worker now drives it to the end).
	wake bool
	// cancel: the sync in flight must stop.
	cancel bool
	// completed are kill channels to close now.
	completed []chan<- struct{}
}

// reconcile applies SyncKnownPods to one worker; desired says whether the
// pod is in the desired set. A finished worker is forgotten when its pod
// left the config or its UID was created again. A pod that left the config
// while it runs starts terminating (the workers own the pod's end, nobody
// else will send updates for it); one that never started is forgotten.
func (s *podState) reconcile(desired bool, now time.Time) known {
	var k known
	if desired && !s.restartRequested {
		return k
	}
	if s.finished {
		k.remove = true
		return k
	}
	if desired {
		return k // restart requested: forget it once finished
	}
	s.deleted = true
	switch {
	case !s.started && !s.observedRuntime:
		k.remove = true
		k.completed = s.takeCompleted()
		return k
	case !s.terminationRequested():
		s.terminatingAt = stamp(now)
		var pod *v1.Pod
		if s.active != nil {
			pod = s.active.Pod
		}
		s.gracePeriod, _ = effectiveGracePeriod(0, pod, nil)
		k.cancel = true
	}
	s.requeueActive()
	k.wake = s.pending != nil
	return k
}

// sync summarizes the worker for SyncKnownPods.
func (s *podState) sync(orphan bool) PodWorkerSync {
	ws := PodWorkerSync{State: s.phase(), Orphan: orphan}
	if pod := s.knownPod(); pod != nil {
		ws.HasConfig = true
		ws.Static = podmodel.IsStatic(pod)
	}
	return ws
}

// effectiveGracePeriod returns the grace period, in seconds, of a pod that
// terminates, given the one already in force (0 when none). The API
// server's deletionGracePeriodSeconds and a kill's override replace it
// when shorter; without any of them the spec's terminationGracePeriodSeconds
// applies; the result is at least 1. shortened reports that a grace period
// already in force changed (it can only shrink).
func effectiveGracePeriod(current int64, pod *v1.Pod, kill *KillPodOptions) (grace int64, shortened bool) {
	grace, have := current, current != 0
	lower := func(v *int64) {
		if v != nil && (!have || *v < grace) {
			grace, have = *v, true
		}
	}
	if pod != nil {
		lower(pod.DeletionGracePeriodSeconds)
	}
	if kill != nil {
		lower(kill.PodTerminationGracePeriodSecondsOverride)
	}
	if !have && pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	grace = max(grace, 1)
	return grace, current != 0 && grace != current
}

// staticNames makes static pods with the same full name start one after
// the other, in the order the workers first saw them: a new UID for a
// name waits until the UID holding it finished.
type staticNames struct {
	started map[string]types.UID
	waiting map[string][]types.UID
}

// wait queues uid for its full name.
func (n *staticNames) wait(name string, uid types.UID) {
	if n.waiting == nil {
		n.waiting = map[string][]types.UID{}
	}
	n.waiting[name] = append(n.waiting[name], uid)
}

// allow reports whether uid may start now, and if so gives it the name.
// It may when no other UID holds the name and every UID queued before it
// can no longer start (eligible false: stopped or forgotten).
func (n *staticNames) allow(name string, uid types.UID, eligible func(types.UID) bool) bool {
	if holder, ok := n.started[name]; ok {
		return holder == uid
	}
	queue := n.waiting[name]
	for i, w := range queue {
		if w == uid {
			queue = queue[i+1:]
			break
		}
		if eligible(w) {
			n.waiting[name] = queue[i:]
			return false
		}
	}
	if len(queue) == 0 {
		n.deleteWaiting(name)
	} else {
		n.waiting[name] = queue
	}
	if n.started == nil {
		n.started = map[string]types.UID{}
	}
	n.started[name] = uid
	return true
}

// release frees the name if uid held it and drops uid from the queue. It
// returns the UIDs still waiting for the name, to be woken.
func (n *staticNames) release(name string, uid types.UID) []types.UID {
	if n.started[name] == uid {
		delete(n.started, name)
	}
	queue := n.waiting[name]
	var rest []types.UID
	for _, w := range queue {
		if w != uid {
			rest = append(rest, w)
		}
	}
	if len(rest) == 0 {
		n.deleteWaiting(name)
	} else {
		n.waiting[name] = rest
	}
	return rest
}

// deleteWaiting forgets the queue of a name. The map is dropped when it
// empties: a burst of static pods grows it to every pod, and a map never
// gives back the room it grew.
func (n *staticNames) deleteWaiting(name string) {
	delete(n.waiting, name)
	if len(n.waiting) == 0 {
		n.waiting = nil
	}
}

// The queries, as the kubelet answers them. s is nil for a UID the
// workers do not know; synced is true once SyncKnownPods ran, after which
// an unknown pod is known not to run.

func isPodKnownTerminated(s *podState) bool {
	return s != nil && s.terminated()
}

func couldHaveRunningContainers(s *podState, synced bool) bool {
	if s == nil {
		return !synced
	}
	return !s.terminated()
}

func shouldPodContainersBeTerminating(s *podState, synced bool) bool {
	if s == nil {
		return synced
	}
	return s.startedTerminating
}

func isPodTerminationRequested(s *podState) bool {
	return s != nil && s.terminationRequested()
}

func shouldPodRuntimeBeRemoved(s *podState, synced bool) bool {
	if s == nil {
		return synced
	}
	return s.terminated()
}

func shouldPodContentBeRemoved(s *podState, synced bool) bool {
	if s == nil {
		return synced
	}
	return s.evicted || (s.deleted && s.terminated())
}

func terminalPhase(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// runtimeStopped reports whether a runtime status shows nothing running:
// no running container, no ready sandbox.
func runtimeStopped(st *runtime.PodStatus) bool {
	if st == nil {
		return true
	}
	for _, c := range st.ContainerStatuses {
		if c.State == runtime.ContainerStateRunning {
			return false
		}
	}
	for _, sb := range st.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return false
		}
	}
	return true
}
