// Package synchandler holds the default syncloop.SyncHandler, the
// kubelet's pod handling: Handler records the pods of the sources in a pod
// manager (package podmanager), admits new ones (package admission), hands
// each pod to its pod worker (package podworker) and runs housekeeping
// (HandlePodCleanups): the workers, statuses, probes, volumes, cgroups,
// runtime objects and mirror pods of pods that are gone are released.
//
// # Usage
//
//	h, err := synchandler.New(synchandler.Config{
//		Pods: podmanager.New(), Workers: workers, Statuses: statuses,
//		Volumes: volumes, Probes: probes, Cgroups: cgroups,
//		Runtime: synchandler.CachedRuntimePods(podRuntime, cache), Cache: cache,
//	})
//	loop, err := syncloop.New(h, syncloop.Config{Pods: h.Pods(), ...})
//	// h.Run removes gone pods' runtime objects off the loop: run it
//	// beside the loop, stopping after it.
//	go h.Run(ctx)
//	err = loop.Run(ctx)
//
// Each part is an interface of the methods the handler calls; replace any
// of them, or the whole handler: the sync loop needs only a
// syncloop.SyncHandler.
//
// # Concurrency
//
// A Handler is safe for concurrent use; the sync loop calls it from one
// goroutine. While its Run runs, housekeeping hands the pods whose runtime
// objects go to Run's goroutines and returns, as the kubelet's container
// garbage collector removes them off its sync loop; without Run, a pass
// removes them itself and waits for them. Either way, several pods are
// removed at once (removeParallelism).
package synchandler

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/internal/logagg"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/syncloop"
)

// The parts Handler uses, each with only the methods it calls. The
// defaults are podworker.Workers, status.Manager, volume.Manager,
// probe.Manager, cgroup.PodManager, the pod-level runtime manager (or
// CachedRuntimePods over it), pleg.Cache and mirror.Manager.
type (
	// PodWorkers run one goroutine per pod.
	PodWorkers interface {
		UpdatePod(opts podworker.UpdateOptions)
		IsPodTerminationRequested(uid types.UID) bool
		IsPodKnownTerminated(uid types.UID) bool
		SyncKnownPods(desired []*v1.Pod) map[types.UID]podworker.PodWorkerSync
	}
	// VolumeSet tracks which pods need their volumes.
	VolumeSet interface {
		AddPod(pod *v1.Pod)
		CleanupOrphans(ctx context.Context, keep map[types.UID]bool) error
	}
	// ProbeSet runs the pods' probe workers.
	ProbeSet interface {
		AddPod(pod *v1.Pod)
		RemovePod(pod *v1.Pod)
		CleanupPods(desired map[types.UID]bool)
	}
	// NodeCgroups keeps the QoS cgroups and finds orphaned pod cgroups:
	// Pods lists only the pod cgroups this agent created (another agent's
	// under a shared root are not its orphans).
	NodeCgroups interface {
		Enabled() bool
		UpdateQoS(activePods []*v1.Pod) error
		Pods() ([]types.UID, error)
		DestroyPod(ctx context.Context, uid types.UID) error
	}
	// RuntimePods lists and removes what the runtime holds of pods.
	RuntimePods interface {
		GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error)
		RemovePod(ctx context.Context, uid types.UID) error
		Forget(uid types.UID)
	}
	// StatusSet holds the pods' API statuses and forgets those of pods
	// that are gone.
	StatusSet interface {
		SetPodStatus(pod *v1.Pod, status v1.PodStatus) bool
		GetPodStatus(uid types.UID) (v1.PodStatus, bool)
		// PodTerminated is told of a rejected pod: it never runs.
		PodTerminated(uid types.UID)
		RemoveOrphans(desired map[types.UID]bool)
	}
	// CacheDeleter forgets a pod's cached runtime status.
	CacheDeleter interface{ Delete(uid types.UID) }
	// MirrorPods keeps the mirror pods of the static pods. One that has a
	// method Waiting() bool (mirror.Manager) reports with it that it put
	// off work (the API server is away): housekeeping then calls Sync at
	// every pass, as after a failed one, without an error to log.
	MirrorPods interface {
		Sync(ctx context.Context, staticPods []*v1.Pod) error
	}
)

// Config holds the parts of a Handler. Every field but Admit,
// Mirrors and Logger is required.
type Config struct {
	Pods     *podmanager.Manager
	Workers  PodWorkers
	Statuses StatusSet
	Volumes  VolumeSet
	Probes   ProbeSet
	Cgroups  NodeCgroups
	Runtime  RuntimePods
	Cache    CacheDeleter
	// Admit are the admission checks, in order; the first rejection
	// wins. Defaults to none: every pod is admitted.
	Admit []admission.Handler
	// Mirrors keeps mirror pods; nil for a standalone agent.
	Mirrors MirrorPods
	Logger  logr.Logger
}

// Handler is the default syncloop.SyncHandler, the kubelet's pod handling:
// it records the pods, admits new ones, hands each pod to its worker and
// runs housekeeping. It is safe for concurrent use; the sync loop calls it
// from one goroutine.
//
// The agent builds it from its default parts (nodekit.Options.Admit adds
// admission checks, nodekit.Options.WrapPodSyncer replaces the per-pod
// sync); assemble it with New from parts of your own, or wrap it with
// nodekit.Options.WrapHandler to observe or change the loop's work.
type Handler struct {
	c Config

	mu sync.Mutex
	// rejected holds the pods admission turned away; they are never handed
	// to a worker.
	rejected map[types.UID]bool
	// qosPods is the set of active pods the QoS cgroups were last sized
	// for (a hash of their UIDs), so that housekeeping writes them only
	// when it changed.
	qosPods uint64
	// activeMu guards active, the active pods kept for admission (see
	// activeCache); it is taken before mu.
	activeMu sync.Mutex
	active   activeCache
	// hadWorker are the pods that had a worker at the last housekeeping
	// pass (see forgetGone).
	hadWorker map[types.UID]bool
	// cleaned is what the last housekeeping pass that succeeded saw, and
	// when it ran (see HandlePodCleanups).
	cleaned struct {
		ok  bool
		key cleanupKey
		at  time.Time
	}
	// rm holds the removals of gone pods' runtime objects that Run makes.
	rm removals
}

// removals are the pods whose runtime objects Run removes: queued by
// housekeeping, then removed, removeParallelism at a time.
type removals struct {
	mu sync.Mutex
	// running: Run runs, and takes the removals; ran: it was called.
	running, ran bool
	queue        []*runtime.Pod
	// pending holds a channel for each pod queued or being removed,
	// closed once it is no longer.
	pending map[types.UID]chan struct{}
	// ctx and remove are Start's; busy counts the workers, which workers
	// waits for.
	ctx     context.Context
	remove  func(context.Context, *runtime.Pod)
	busy    int
	workers sync.WaitGroup
	// failed counts the removals that failed, so that housekeeping's next
	// pass runs (and queues them again) rather than skipping.
	failed atomic.Uint64
	errs   *logagg.Aggregator
}

// activeCache holds the active pods between batches of additions, so that
// admitting a batch costs in proportion to the batch rather than to the
// pods on the node: the API server's source hands pods over one at a
// time. It holds while no pod was removed and no worker ended (the only
// ways for a pod to leave the active pods besides rejection, which never
// lets one in); an update replaces the pod in place.
type activeCache struct {
	ok                bool
	removals, workers uint64
	pods              []*v1.Pod
	index             map[types.UID]int
}

// set records pods as the active pods, as of the counts given.
func (c *activeCache) set(pods []*v1.Pod, removals, workers uint64) {
	c.ok, c.removals, c.workers, c.pods = true, removals, workers, pods
	if c.index == nil {
		c.index = make(map[types.UID]int, len(pods))
	}
	clear(c.index)
	for i, p := range pods {
		c.index[p.UID] = i
	}
}

// add appends pod, or replaces the pod of the same UID.
func (c *activeCache) add(pod *v1.Pod) {
	if i, ok := c.index[pod.UID]; ok {
		c.pods[i] = pod
		return
	}
	c.index[pod.UID] = len(c.pods)
	c.pods = append(c.pods, pod)
}

// update replaces the pod of the same UID, if held. The slice handed out
// before is left as it was: admission checks may keep it.
func (c *activeCache) update(pod *v1.Pod) {
	if i, ok := c.index[pod.UID]; ok && c.pods[i] != pod {
		c.pods = slices.Clone(c.pods)
		c.pods[i] = pod
	}
}

// cleanupKey is what housekeeping depends on, as counts of changes: the
// pods of the sources, the pods' workers that ended, the runtime's pods
// and the removals of runtime objects that failed. A pass over the same
// key finds nothing to do.
type cleanupKey struct {
	pods, workers, runtime, failed uint64
}

// fullCleanupPeriod is how often housekeeping runs in full even though
// nothing it depends on changed: what changes out of the agent's sight
// (a pod cgroup or directory left by someone else, a mirror pod the API
// server lost) is cleaned up within it.
const fullCleanupPeriod = time.Minute

// terminationCounter is the optional capability of PodWorkers that lets
// housekeeping skip passes that would find nothing new
// (podworker.Workers has it).
type terminationCounter interface {
	Terminations() uint64
}

// cachePruner is the optional capability of CacheDeleter that forgets
// the pods housekeeping no longer knows that hold nothing of the runtime,
// and returns them (pleg.StatusCache has it).
type cachePruner interface {
	Prune(keep func(types.UID) bool) []types.UID
}

// changeCounter is the optional capability of RuntimePods that counts
// the changes of the runtime's pods it lists; false when it cannot (it
// would list the runtime).
type changeCounter interface {
	changes() (uint64, bool)
}

var (
	_ syncloop.SyncHandler         = (*Handler)(nil)
	_ syncloop.HousekeepingSettler = (*Handler)(nil)
)

// New checks c and returns a Handler over its parts.
func New(c Config) (*Handler, error) {
	if c.Pods == nil || c.Workers == nil || c.Statuses == nil || c.Volumes == nil || c.Probes == nil || c.Cgroups == nil || c.Runtime == nil || c.Cache == nil {
		return nil, errors.New("synchandler: Config needs Pods, Workers, Statuses, Volumes, Probes, Cgroups, Runtime and Cache")
	}
	h := &Handler{c: c, rejected: make(map[types.UID]bool)}
	h.rm.errs = logagg.New(c.Logger, logagg.Options{})
	return h, nil
}

// Run removes the runtime objects of the pods housekeeping finds gone,
// off the sync loop, until ctx ends; then it waits for the removals in
// flight (cut short by ctx) and returns nil. Without Run, housekeeping
// removes them itself. Run must be called once.
func (h *Handler) Run(ctx context.Context) error { return run.Until(ctx, h) }

// Start is Run without waiting for ctx to end (run.Starter): the removals
// run on goroutines that last while pods are queued, removeParallelism at
// most.
func (h *Handler) Start(ctx context.Context) (wait func(), err error) {
	r := &h.rm
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ran {
		return nil, errors.New("synchandler: Run called more than once")
	}
	r.ran, r.running = true, true
	r.ctx = ctx
	r.remove = func(ctx context.Context, rp *runtime.Pod) {
		if err := h.remove(ctx, rp); err != nil {
			r.failed.Add(1)
			r.errs.ErrorFor(string(rp.ID), err, "Removing a gone pod from the runtime", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
		}
	}
	return func() {
		<-ctx.Done()
		r.mu.Lock()
		r.running = false
		for _, rp := range r.queue {
			r.doneLocked(rp.ID)
		}
		r.queue = nil
		r.mu.Unlock()
		r.workers.Wait()
	}, nil
}

// spawnLocked starts workers for the queued pods, up to removeParallelism
// in all. Called with r.mu held, while running.
func (r *removals) spawnLocked() {
	for r.busy < removeParallelism && r.busy < len(r.queue) {
		r.busy++
		r.workers.Go(r.work)
	}
}

// work removes queued pods until none is left or Start's context ended.
func (r *removals) work() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 || r.ctx.Err() != nil {
			r.busy--
			r.mu.Unlock()
			return
		}
		rp := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		if len(r.queue) == 0 {
			r.queue = nil // give back the room a burst took
		}
		r.mu.Unlock()
		r.remove(r.ctx, rp)
		r.mu.Lock()
		r.doneLocked(rp.ID)
		r.mu.Unlock()
	}
}

// doneLocked ends the pod's removal: it is no longer pending.
func (r *removals) doneLocked(uid types.UID) {
	if ch, ok := r.pending[uid]; ok {
		close(ch)
		delete(r.pending, uid)
		if len(r.pending) == 0 {
			r.pending = nil // a map gives back no room as it empties
		}
	}
}

// enqueue hands the pods to Run to remove, but for those already pending;
// false when Run does not run (the caller removes them).
func (r *removals) enqueue(pods []*runtime.Pod) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running {
		return false
	}
	added := false
	for _, rp := range pods {
		if _, ok := r.pending[rp.ID]; ok {
			continue
		}
		if r.pending == nil {
			r.pending = make(map[types.UID]chan struct{})
		}
		r.pending[rp.ID] = make(chan struct{})
		r.queue = append(r.queue, rp)
		added = true
	}
	if added {
		r.spawnLocked()
	}
	return true
}

// cancel takes the pod out of the removals, for a pod added again (a
// static pod's manifest back with the same content): a queued removal is
// dropped, one in flight is waited for, so that it removes nothing the
// pod's new worker makes.
func (r *removals) cancel(ctx context.Context, uid types.UID) {
	r.mu.Lock()
	ch, ok := r.pending[uid]
	if !ok {
		r.mu.Unlock()
		return
	}
	if i := slices.IndexFunc(r.queue, func(rp *runtime.Pod) bool { return rp.ID == uid }); i >= 0 {
		r.queue = slices.Delete(r.queue, i, i+1)
		r.doneLocked(uid)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

func (h *Handler) isRejected(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rejected[uid]
}

// HandlePodAdditions admits the pods, oldest first, and starts them. The
// QoS cgroups are brought in step with the admitted pods first, as the
// kubelet does before it creates a pod's cgroup.
func (h *Handler) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, false)
	if len(pods) == 0 {
		return
	}
	for _, pod := range pods {
		h.rm.cancel(ctx, pod.UID)
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	// The active pods are computed once (and kept between batches), and
	// each admitted pod joins them: admission stays linear in the number
	// of pods.
	h.activeMu.Lock()
	defer h.activeMu.Unlock()
	h.admissionPodsLocked()
	start := pods[:0:0]
	for _, pod := range pods {
		h.c.Pods.AddOrUpdate(pod)
		if !h.c.Workers.IsPodTerminationRequested(pod.UID) && !podmodel.IsTerminal(pod.Status.Phase) {
			if r := h.canAdmit(pod, h.active.pods); !r.Admit {
				h.reject(pod, r)
				continue
			}
			h.active.add(pod)
		}
		start = append(start, pod)
	}
	h.updateQoS(h.active.pods)
	for _, pod := range start {
		h.addVolumes(pod)
		h.c.Probes.AddPod(pod)
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodCreate, Pod: pod})
	}
}

// Pods is the pod manager the handler records the pods in: the sync loop
// looks pods up there (syncloop.Config.Pods).
func (h *Handler) Pods() *podmanager.Manager { return h.c.Pods }

// ActivePods are the admitted pods that may still run.
func (h *Handler) ActivePods() []*v1.Pod { return h.activePods() }

// admissionPodsLocked brings h.active up to date: the active pods kept
// from the last batch while they still hold, else listed afresh. The
// caller holds activeMu.
func (h *Handler) admissionPodsLocked() {
	_, removals := h.c.Pods.Generation()
	wc, counted := h.c.Workers.(terminationCounter)
	var workers uint64
	if counted {
		workers = wc.Terminations()
	}
	if counted && h.active.ok && h.active.removals == removals && h.active.workers == workers {
		return
	}
	// Read before listing: a change while listing makes the next batch
	// list again.
	active := h.activePods()
	h.active.set(active, removals, workers)
	h.active.ok = counted
}

// dropStaleActiveLocked lets go of the active pods kept for admission
// once they no longer hold (a pod was removed or a worker ended since),
// rather than keep gone pods until the next addition. The caller holds
// activeMu.
func (h *Handler) dropStaleActiveLocked() {
	_, removals := h.c.Pods.Generation()
	if wc, ok := h.c.Workers.(terminationCounter); ok && h.active.ok && h.active.removals == removals && h.active.workers == wc.Terminations() {
		return
	}
	h.active = activeCache{}
}

func (h *Handler) activePods() []*v1.Pod {
	var active []*v1.Pod
	for _, p := range h.c.Pods.Pods() {
		if h.isRejected(p.UID) || h.c.Workers.IsPodKnownTerminated(p.UID) {
			continue
		}
		if s, ok := h.c.Statuses.GetPodStatus(p.UID); ok && podmodel.IsTerminal(s.Phase) {
			continue
		}
		active = append(active, p)
	}
	return active
}

// updateQoS sizes the QoS cgroups for the active pods, unless they were
// sized for the same pods last time. Its callers (the sync loop) do not
// call it concurrently.
func (h *Handler) updateQoS(active []*v1.Pod) {
	if !h.c.Cgroups.Enabled() {
		return
	}
	var sum uint64 = uint64(len(active))
	for _, p := range active {
		f := fnv.New64a()
		f.Write([]byte(p.UID))
		sum += f.Sum64()
	}
	h.mu.Lock()
	same := sum == h.qosPods
	h.mu.Unlock()
	if same {
		return
	}
	if err := h.c.Cgroups.UpdateQoS(active); err != nil {
		h.c.Logger.Error(err, "Updating the QoS cgroups")
		return
	}
	h.mu.Lock()
	h.qosPods = sum
	h.mu.Unlock()
}

func (h *Handler) canAdmit(pod *v1.Pod, active []*v1.Pod) admission.Result {
	for _, a := range h.c.Admit {
		if r := a.Admit(pod, active); !r.Admit {
			return r
		}
	}
	return admission.Result{Admit: true}
}

func (h *Handler) reject(pod *v1.Pod, r admission.Result) {
	h.c.Logger.Info("Pod rejected", "pod", podmodel.FullName(pod), "podUID", pod.UID, "reason", r.Reason, "message", r.Message)
	h.mu.Lock()
	h.rejected[pod.UID] = true
	h.mu.Unlock()
	h.c.Statuses.PodTerminated(pod.UID)
	h.c.Statuses.SetPodStatus(pod, v1.PodStatus{
		Phase:   v1.PodFailed,
		Reason:  r.Reason,
		Message: "Pod was rejected: " + r.Message,
	})
}

// HandlePodUpdates records the new pods and syncs them. A pod the handler
// was never given to add (a wrapper of the handler dropped its ADD: the
// pods manager does not hold it) is an addition: it goes through admission
// as HandlePodAdditions would take it, so that a wrapper's veto is not
// undone by the pod's next update.
func (h *Handler) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, false)
	var added []*v1.Pod
	pods = slices.DeleteFunc(slices.Clone(pods), func(p *v1.Pod) bool {
		if _, known := h.c.Pods.GetPodByUID(p.UID); known {
			return false
		}
		added = append(added, p)
		return true
	})
	if len(added) > 0 {
		h.HandlePodAdditions(ctx, added)
	}
	h.activeMu.Lock()
	for _, pod := range pods {
		h.active.update(pod)
	}
	h.activeMu.Unlock()
	for _, pod := range pods {
		h.c.Pods.AddOrUpdate(pod)
		if h.isRejected(pod.UID) {
			continue
		}
		h.addVolumes(pod)
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodUpdate, Pod: pod})
	}
}

// addVolumes makes the pod's volumes desired, unless its termination was
// requested, as the kubelet's volume populator: the volumes of a
// terminating pod are desired already, and those of a terminated pod are
// released, so an update (the API server's answer to the final delete,
// say) must not make its directory again: nothing would release it.
func (h *Handler) addVolumes(pod *v1.Pod) {
	if h.c.Workers.IsPodTerminationRequested(pod.UID) {
		return
	}
	h.c.Volumes.AddPod(pod)
}

// HandlePodRemoves forgets the pods and stops them.
func (h *Handler) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, true)
	for _, pod := range pods {
		h.c.Pods.Remove(pod)
		if h.isRejected(pod.UID) {
			continue
		}
		h.c.Probes.RemovePod(pod)
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodKill, Pod: pod})
	}
}

// HandlePodReconcile records pods whose status alone changed at their
// source; a pod its source says is terminal is synced so that it stops,
// and so is a pod whose Ready condition its readiness gates contradict
// (podmodel.ReadinessNeedsReconcile).
func (h *Handler) HandlePodReconcile(_ context.Context, pods []*v1.Pod) {
	pods = h.c.Pods.SplitMirrors(pods, false)
	// A pod never added (its ADD was dropped) stays unknown: its next
	// update goes through admission (see HandlePodUpdates).
	pods = slices.DeleteFunc(slices.Clone(pods), func(p *v1.Pod) bool {
		_, known := h.c.Pods.GetPodByUID(p.UID)
		return !known
	})
	h.activeMu.Lock()
	for _, pod := range pods {
		h.active.update(pod)
	}
	h.activeMu.Unlock()
	for _, pod := range pods {
		h.c.Pods.AddOrUpdate(pod)
		// A terminal phase, or readiness gates whose conditions another
		// writer changed, is acted on at once, as the kubelet does.
		if !h.isRejected(pod.UID) && (podmodel.IsTerminal(pod.Status.Phase) || podmodel.ReadinessNeedsReconcile(pod)) {
			h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
		}
	}
}

// HandlePodSyncs syncs the pods.
func (h *Handler) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	for _, pod := range pods {
		if h.isRejected(pod.UID) {
			continue
		}
		h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodSync, Pod: pod})
	}
}

// HandlePodCleanups is housekeeping, run once every source is ready: stop
// workers of pods no source lists, stop containers of pods nobody knows
// (left by an earlier run of the agent), remove the runtime objects and
// agent state of pods that are gone, shrink the QoS cgroups to the active
// pods and keep the mirror pods.
//
// The kubelet runs every pass in full; a pass here is skipped when the
// pods, the workers' terminations and the runtime's pods (as the PLEG's
// cache holds them) are as the last successful pass saw them, so that an
// idle node costs nothing per pod every 2 s. Every fullCleanupPeriod, and
// after a pass that failed, the pass runs in full.
func (h *Handler) HandlePodCleanups(ctx context.Context) error {
	key, comparable := h.cleanupKey()
	now := time.Now()
	h.mu.Lock()
	skip := comparable && h.cleaned.ok && h.cleaned.key == key && now.Sub(h.cleaned.at) < fullCleanupPeriod
	h.mu.Unlock()
	if skip {
		return nil
	}
	err := h.cleanup(ctx)
	w, ok := h.c.Mirrors.(interface{ Waiting() bool })
	waiting := ok && w.Waiting()
	h.mu.Lock()
	h.cleaned.ok = comparable && err == nil && !waiting
	h.cleaned.key, h.cleaned.at = key, now
	h.mu.Unlock()
	return err
}

// HousekeepingSettled reports whether a housekeeping pass now would find
// nothing to do (syncloop.HousekeepingSettler): the last pass succeeded,
// nothing it depends on changed since, and no removal of runtime objects
// it queued is pending (whose end changes the runtime's pods). The sync
// loop then stops its 2 s housekeeping ticks until a message comes (see
// package syncloop): what makes work for housekeeping reaches the loop as
// one (a configuration update, a PLEG event, the end of a pod's worker),
// and what changes out of its sight is found at the loop's idle tick,
// every minute, the fullCleanupPeriod of a pass in full.
func (h *Handler) HousekeepingSettled() bool {
	key, comparable := h.cleanupKey()
	if !comparable {
		return false
	}
	h.rm.mu.Lock()
	pending := len(h.rm.pending) > 0
	h.rm.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	return !pending && h.cleaned.ok && h.cleaned.key == key
}

// cleanupKey reads what housekeeping depends on; false when a part
// cannot tell its changes.
func (h *Handler) cleanupKey() (cleanupKey, bool) {
	var k cleanupKey
	k.pods, _ = h.c.Pods.Generation()
	wc, ok := h.c.Workers.(terminationCounter)
	if !ok {
		return k, false
	}
	k.workers = wc.Terminations()
	rc, ok := h.c.Runtime.(changeCounter)
	if !ok {
		return k, false
	}
	k.runtime, ok = rc.changes()
	k.failed = h.rm.failed.Load()
	return k, ok
}

// ChangeCount is one count of what housekeeping depends on, which the
// container collector depends on too (the runtime's pods, the pods, the
// workers' terminations: each count only grows, so their sum moves when
// any does), and whether it can be told: not before a housekeeping pass
// succeeded (the workers then know which pods are theirs) nor after one
// failed.
func (h *Handler) ChangeCount() (uint64, bool) {
	k, ok := h.cleanupKey()
	h.mu.Lock()
	ok = ok && h.cleaned.ok
	h.mu.Unlock()
	return k.pods + k.workers + k.runtime + k.failed, ok
}

// cleanup is one full housekeeping pass.
func (h *Handler) cleanup(ctx context.Context) error {
	h.activeMu.Lock()
	h.dropStaleActiveLocked()
	h.activeMu.Unlock()
	desired := h.c.Pods.Pods()
	desiredUIDs := make(map[types.UID]bool, len(desired))
	for _, p := range desired {
		desiredUIDs[p.UID] = true
	}
	h.mu.Lock()
	for uid := range h.rejected {
		if !desiredUIDs[uid] {
			delete(h.rejected, uid)
		}
	}
	h.mu.Unlock()

	workers := h.c.Workers.SyncKnownPods(desired)
	h.c.Statuses.RemoveOrphans(desiredUIDs)
	h.c.Probes.CleanupPods(desiredUIDs)

	all, err := h.c.Runtime.GetPods(ctx, true)
	if err != nil {
		return fmt.Errorf("synchandler: housekeeping: listing runtime pods: %w", err)
	}
	h.forgetGone(workers, desiredUIDs, all)
	if c, ok := h.c.Cache.(cachePruner); ok {
		for _, uid := range c.Prune(func(uid types.UID) bool {
			_, known := workers[uid]
			return known || desiredUIDs[uid]
		}) {
			h.c.Runtime.Forget(uid)
		}
	}
	// Pod directories go with the pods: those no source wants, whose
	// worker is done (or gone: a pod stopped before it started) and that
	// have nothing left in the runtime.
	keep := maps.Clone(desiredUIDs)
	for _, rp := range all {
		keep[rp.ID] = true
	}
	for uid, w := range workers {
		if w.State != podworker.TerminatedPod {
			keep[uid] = true
		}
	}
	var errs []error
	if err := h.c.Volumes.CleanupOrphans(ctx, keep); err != nil {
		errs = append(errs, err)
	}
	if err := h.cleanupCgroups(ctx, keep, workers); err != nil {
		errs = append(errs, err)
	}
	if h.c.Cgroups.Enabled() {
		// Listing the active pods reads every pod's status: not without
		// QoS cgroups to size.
		h.updateQoS(h.activePods())
	}
	if h.c.Mirrors != nil {
		var static []*v1.Pod
		for _, p := range desired {
			if podmodel.IsStatic(p) && !h.isRejected(p.UID) {
				static = append(static, p)
			}
		}
		if err := h.c.Mirrors.Sync(ctx, static); err != nil {
			errs = append(errs, err)
		}
	}
	var gone []*runtime.Pod
	for _, rp := range all {
		if _, known := workers[rp.ID]; known {
			continue
		}
		if desiredUIDs[rp.ID] && !h.isRejected(rp.ID) {
			// Its worker is about to start.
			continue
		}
		if hasRunning(rp) {
			h.c.Logger.V(1).Info("Stopping pod unknown to the agent", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
			h.c.Workers.UpdatePod(podworker.UpdateOptions{UpdateType: podworker.SyncPodKill, RunningPod: rp})
			continue
		}
		// Nothing runs and nobody wants it: remove what is left.
		gone = append(gone, rp)
	}
	if !h.rm.enqueue(gone) {
		errs = append(errs, h.removeGone(ctx, gone)...)
	}
	h.rm.errs.Flush()
	return errors.Join(errs...)
}

// removeParallelism bounds the pods whose runtime objects housekeeping
// removes at once. A removal waits on the runtime (several calls, each a
// round trip, and the pod's log directory on disk): the pods of a churn,
// removed one after the other, made a pass last seconds, and housekeeping
// rests for a multiple of its last pass (syncloop), so the next ones waited
// longer still.
const removeParallelism = 8

// removeGone removes the runtime objects of the pods, removeParallelism at
// a time, and forgets them; it returns the errors of those it could not
// remove.
func (h *Handler) removeGone(ctx context.Context, pods []*runtime.Pod) []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan *runtime.Pod)
	)
	for range min(removeParallelism, len(pods)) {
		wg.Go(func() {
			for rp := range next {
				if err := h.remove(ctx, rp); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, rp := range pods {
		next <- rp
	}
	close(next)
	wg.Wait()
	return errs
}

// remove removes the pod's runtime objects and forgets it.
func (h *Handler) remove(ctx context.Context, rp *runtime.Pod) error {
	if err := h.c.Runtime.RemovePod(ctx, rp.ID); err != nil {
		return fmt.Errorf("removing pod %s: %w", rp.ID, err)
	}
	h.c.Runtime.Forget(rp.ID)
	h.c.Cache.Delete(rp.ID)
	h.c.Logger.V(1).Info("Removed pod from the runtime", "pod", rp.Namespace+"/"+rp.Name, "podUID", rp.ID)
	return nil
}

// forgetGone makes the runtime manager and the status cache forget the
// pods whose worker went since the last pass, that no source wants and
// that have nothing in the runtime: the runtime objects of the others are
// removed below, which forgets them, but a pod stopped before it started,
// or whose objects went before its worker read it a last time, has none.
func (h *Handler) forgetGone(workers map[types.UID]podworker.PodWorkerSync, desired map[types.UID]bool, all []*runtime.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var inRuntime map[types.UID]bool
	for uid := range h.hadWorker {
		if _, ok := workers[uid]; ok || desired[uid] {
			continue
		}
		if inRuntime == nil {
			inRuntime = make(map[types.UID]bool, len(all))
			for _, rp := range all {
				inRuntime[rp.ID] = true
			}
		}
		if !inRuntime[uid] {
			h.c.Runtime.Forget(uid)
			h.c.Cache.Delete(uid)
		}
	}
	if len(workers) == 0 {
		h.hadWorker = nil // a map gives back no room as it empties
		return
	}
	if h.hadWorker == nil {
		h.hadWorker = make(map[types.UID]bool, len(workers))
	}
	clear(h.hadWorker)
	for uid := range workers {
		h.hadWorker[uid] = true
	}
}

// cleanupCgroups removes the cgroups of pods nobody wants, that have no
// worker and nothing in the runtime.
func (h *Handler) cleanupCgroups(ctx context.Context, keep map[types.UID]bool, workers map[types.UID]podworker.PodWorkerSync) error {
	if !h.c.Cgroups.Enabled() {
		return nil
	}
	uids, err := h.c.Cgroups.Pods()
	if err != nil {
		return fmt.Errorf("synchandler: housekeeping: listing pod cgroups: %w", err)
	}
	var errs []error
	for _, uid := range uids {
		if _, known := workers[uid]; known || keep[uid] {
			continue
		}
		if err := h.c.Cgroups.DestroyPod(ctx, uid); err != nil {
			errs = append(errs, err)
			continue
		}
		h.c.Logger.V(1).Info("Removed orphaned pod cgroup", "podUID", uid)
	}
	return errors.Join(errs...)
}

func hasRunning(p *runtime.Pod) bool {
	for _, c := range p.Containers {
		if c.State == runtime.ContainerStateRunning {
			return true
		}
	}
	for _, s := range p.Sandboxes {
		if s.State == runtime.ContainerStateRunning {
			return true
		}
	}
	return false
}
