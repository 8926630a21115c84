// Package allocation holds the allocation manager, the kubelet's: the
// resources allocated to each admitted pod, kept in a checkpoint so that
// a restarted agent runs its pods with the resources it allocated, and
// the in-place resizes of pods (InPlacePodVerticalScaling): decided when
// the node has room (podmodel.DecideResize), deferred or infeasible
// otherwise (the PodResizePending condition), retried on the kubelet's
// triggers and every 3 minutes.
//
// A Manager joins an agent at three points, each a wrapper: Admit around
// the admission checks (pods are admitted as allocated), WrapSync around
// the pod workers' sync (each pod runs as allocated, its resize decided
// first) and WrapHandler around the sync loop's handler (the retry
// triggers); Run runs its periodic retry. A hand-assembled agent (without
// package nodekit) that wants no resizes in place leaves it out: its pods
// then run as their spec says. It is internal: only nodekit's wiring
// builds it.
//
// # Concurrency
//
// A Manager is safe for concurrent use; Run blocks until its context
// ends.
package allocation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/internal/atomicfile"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/run"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
)

// checkpointFile is where an agent keeps the resources allocated to its
// pods, below its root directory (the kubelet's allocated_pods_state
// checkpoint).
const checkpointFile = "checkpoints/allocated-pods.json"

// Config holds what a Manager reads of the rest of the agent. The
// functions may be called from New on; those the agent builds after the
// Manager (its handler, its workers) answer nothing until they exist.
type Config struct {
	// RootDir is the agent's directory: the allocations are kept in
	// <RootDir>/checkpoints/allocated-pods.json. Defaults to "": in
	// memory only.
	RootDir string
	// Known reports whether a pod UID is still the agent's (the pod
	// manager's); allocations of others are dropped at the next write.
	// Required.
	Known func(types.UID) bool
	// PodByUID finds a pod the agent knows. Required.
	PodByUID func(types.UID) (*v1.Pod, bool)
	// ActivePods returns the admitted pods that may still run. Required.
	ActivePods func() []*v1.Pod
	// Allocatable is the node's allocatable cpu and memory. Required.
	Allocatable func() v1.ResourceList
	// SourcesReady reports whether every pod source delivered its pods;
	// deferred resizes are retried only then. Required.
	SourcesReady func() bool
	// TriggerSync asks for a pod's sync. Required.
	TriggerSync func(*v1.Pod)
	// Recorder receives the resize events. Defaults to none.
	Recorder runtime.EventRecorder
	// ResizeError is the message of the pod's last failed resize in
	// place (the runtime manager's), false when none. Defaults to none.
	ResizeError func(types.UID) (string, bool)
	// Cached is the pod's runtime status as its sync last read it (the
	// PLEG's cache), nil when unknown. Defaults to none.
	Cached func(types.UID) *runtime.PodStatus
	// PodCgroup reads the pod cgroup of a pod with pod-level resources
	// (podsync.PodCgroupState), nil when unknown. Defaults to none.
	PodCgroup func(*v1.Pod) *status.PodCgroupState
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Periodic, when set, runs the periodic retries as a task of the
	// Driver, which the agents of one process can share (hollow nodes
	// do): the Manager then holds no goroutine between them, and Clock
	// only tells the time. Defaults to nil: Run's goroutine waits on a
	// timer of Clock's.
	Periodic *periodic.Driver
	Logger   logr.Logger
}

// New checks c and returns a Manager. It does no I/O: the checkpoint is
// read at the first use.
func New(c Config) (*Manager, error) {
	if c.Known == nil || c.PodByUID == nil || c.ActivePods == nil || c.Allocatable == nil || c.SourcesReady == nil || c.TriggerSync == nil {
		return nil, errors.New("allocation: Config needs Known, PodByUID, ActivePods, Allocatable, SourcesReady and TriggerSync")
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	r := &Manager{
		log: c.Logger, known: c.Known, active: c.ActivePods, allocatable: c.Allocatable,
		podByUID: c.PodByUID, sourcesReady: c.SourcesReady, triggerSync: c.TriggerSync,
		resizeError: c.ResizeError, cached: c.Cached, podCgroup: c.PodCgroup, clock: c.Clock,
		kick: make(chan struct{}, 1), periodic: c.Periodic,
	}
	if c.RootDir != "" {
		r.path = filepath.Join(c.RootDir, checkpointFile)
	}
	if rec := c.Recorder; rec != nil {
		r.event = func(pod *v1.Pod, eventtype, reason, message string) { rec.Event(pod, eventtype, reason, message) }
	}
	return r, nil
}

// The kubelet's allocation manager retries the deferred Manager every
// retryDelay, and initialRetryDelay after its start or after a retry that
// found the pod sources not all ready.
const (
	initialRetryDelay = 30 * time.Second
	retryDelay        = 3 * time.Minute
)

// The triggers of a retry of the deferred Manager, as the kubelet names
// them (logged with each retry).
const (
	triggerPodResized    = "pod_resized"
	triggerPodsAdded     = "pods_added"
	triggerPodsRemoved   = "pods_removed"
	triggerPodTerminated = "pod_terminated"
	triggerPeriodic      = "periodic_retry"
)

// Manager is the allocation manager: the resources allocated to
// each admitted pod, kept in a checkpoint so that a restarted agent runs
// its pods with the resources it allocated (not whatever their spec asks
// for now), and the pods' pending resizes. The pod workers run the pods
// as allocated (podmodel.WithAllocation); a pod whose spec asks for other
// resources is resized when podmodel.DecideResize allows it, at its sync.
// A deferred resize is decided again, as the kubelet's allocation manager
// does, when another pod's update asks for a resize, when pods are added
// that ask for one or removed, when a pod terminates, and every
// retryDelay (Run); the pod is synced at once when its resize was
// allocated or its PodResizePending changed. The events are the kubelet's
// (reasons and messages): ResizeStarted, ResizeDeferred, ResizeInfeasible,
// ResizeCompleted (once the runtime reports the allocated resources) and
// ResizeError. It is safe for concurrent use: one mutex orders the
// decisions, so two resizes never both take the last free resources.
type Manager struct {
	path string // "" keeps the allocations in memory only
	log  logr.Logger
	// known reports whether a pod UID is still the agent's; allocations
	// of others are dropped when the checkpoint is written.
	known func(types.UID) bool
	// active returns the admitted pods that may still run.
	active func() []*v1.Pod
	// allocatable is the node's allocatable cpu and memory.
	allocatable func() v1.ResourceList
	event       func(pod *v1.Pod, eventtype, reason, message string)
	// podByUID finds a pod the agent knows, sourcesReady reports whether
	// every pod source delivered its pods, and triggerSync asks for a
	// pod's sync: a retry of the deferred Manager needs them (none is
	// done without podByUID).
	podByUID     func(types.UID) (*v1.Pod, bool)
	sourcesReady func() bool
	triggerSync  func(*v1.Pod)
	// resizeError is the message of the pod's last failed resize in
	// place (podruntime.Manager.ResizeError), nil when unknown.
	resizeError func(types.UID) (string, bool)
	// cached is the pod's runtime status as the sync last read it (the
	// pod status cache), nil when unknown.
	cached func(types.UID) *runtime.PodStatus
	// podCgroup reads the pod cgroup of a pod with pod-level resources
	// (podCgroupState), nil when unknown.
	podCgroup func(*v1.Pod) *status.PodCgroupState
	clock     clock.Clock // defaults to the real clock
	// periodic is Config.Periodic; task its retries, once started.
	periodic *periodic.Driver
	task     *periodic.Task
	// kick tells Run that a retry ran, so that the next periodic one is
	// next (under mu) later.
	kick chan struct{}

	mu      sync.Mutex
	loaded  bool
	alloc   map[types.UID]podmodel.Allocation
	pending map[types.UID]pendingResize
	// queued are pods asking for a resize not yet decided, which the
	// next retry decides with the deferred ones.
	queued map[types.UID]bool
	// inProgress holds, for each pod with a resize allocated and not yet
	// in the runtime, the generation it was allocated at; lastError the
	// message of its last failed resize in place.
	inProgress map[types.UID]int64
	lastError  map[types.UID]string
	next       time.Duration
	// dirty: allocations made at admission are not in the checkpoint
	// yet; the next sync writes them (a pod admitted but never synced
	// has run nothing, and is admitted again after a restart).
	dirty bool
	// asAllocated holds each pod as allocated (podmodel.WithAllocation),
	// by pod object, until its allocation changes: admission sees every
	// active pod as allocated at every admission, and the same objects
	// let the admission checks add only the pods admitted since.
	asAllocated map[types.UID]allocatedPod
	// allocGen counts the changes of allocations already made; admitIn
	// and admitOut are the active pods of the last admission and the
	// same pods as allocated, kept while allocGen stays: admitting a pod
	// maps only the pods added since, not every active pod again.
	allocGen          uint64
	admitMu           sync.Mutex
	admitGen          uint64
	admitIn, admitOut []*v1.Pod
}

// pendingResize is a resize not allocated: its PodResizePending
// condition, and since when it has been pending.
type pendingResize struct {
	cond  v1.PodCondition
	since time.Time
}

// allocatedPod is a pod as allocated: out is pod with its allocation,
// pod itself when the allocation changes nothing (podmodel.WithAllocation),
// so that out != pod tells whether it changed without a field more in an
// entry kept for every pod.
type allocatedPod struct {
	pod, out *v1.Pod
}

// allocationCheckpoint is the checkpoint file's content.
type allocationCheckpoint struct {
	Version int                               `json:"version"`
	Pods    map[types.UID]podmodel.Allocation `json:"pods"`
}

// loadLocked reads the checkpoint once. A missing file is an empty one; an
// unreadable one is logged and replaced at the next write (its pods are
// allocated what their spec asks for, as at their first admission).
func (r *Manager) loadLocked() {
	if r.loaded {
		return
	}
	r.loaded = true
	r.alloc = map[types.UID]podmodel.Allocation{}
	r.pending = map[types.UID]pendingResize{}
	r.queued = map[types.UID]bool{}
	r.inProgress = map[types.UID]int64{}
	r.lastError = map[types.UID]string{}
	if r.path == "" {
		return
	}
	data, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var cp allocationCheckpoint
	if err == nil {
		err = json.Unmarshal(data, &cp)
	}
	if err == nil && cp.Version != 1 {
		err = fmt.Errorf("unknown version %d", cp.Version)
	}
	if err != nil {
		r.log.Error(err, "Ignoring the unreadable allocation checkpoint", "path", r.path)
		return
	}
	for uid, a := range cp.Pods {
		r.alloc[uid] = a
	}
}

// storeLocked writes the checkpoint (a temporary file renamed over it),
// keeping the pods the agent still knows.
func (r *Manager) storeLocked() {
	if r.path == "" {
		return
	}
	r.dirty = false
	for uid := range r.alloc {
		if r.known != nil && !r.known(uid) {
			r.forgetLocked(uid)
		}
	}
	for uid := range r.asAllocated {
		if r.known != nil && !r.known(uid) {
			delete(r.asAllocated, uid)
		}
	}
	data, err := json.Marshal(allocationCheckpoint{Version: 1, Pods: r.alloc})
	if err == nil {
		err = atomicfile.WriteFile(r.path, data, 0o700)
	}
	if err != nil {
		r.log.Error(err, "Writing the allocation checkpoint", "path", r.path)
	}
}

// forgetLocked drops what the agent knows of a pod's resources.
func (r *Manager) forgetLocked(uid types.UID) {
	delete(r.alloc, uid)
	delete(r.pending, uid)
	delete(r.queued, uid)
	delete(r.inProgress, uid)
	delete(r.lastError, uid)
	delete(r.asAllocated, uid)
}

// removeOrphans forgets the pods the agent no longer knows (housekeeping,
// the kubelet's RemoveOrphanedPods): their allocations, written to the
// checkpoint again when one went, their resize state and the pods as
// allocated, with the last admission's pods.
func (r *Manager) removeOrphans() {
	if r.known == nil {
		return
	}
	r.mu.Lock()
	r.loadLocked()
	stored := false
	for uid := range r.alloc {
		if !r.known(uid) {
			r.forgetLocked(uid)
			stored = true
		}
	}
	// Deleting from a map while ranging over it is allowed.
	forgot := forgetUnknown(r, r.asAllocated) || stored
	forgot = forgetUnknown(r, r.pending) || forgot
	forgot = forgetUnknown(r, r.queued) || forgot
	forgot = forgetUnknown(r, r.inProgress) || forgot
	forgot = forgetUnknown(r, r.lastError) || forgot
	if stored {
		r.storeLocked()
	}
	if forgot {
		r.shrinkLocked()
	}
	r.mu.Unlock()
	r.admitMu.Lock()
	defer r.admitMu.Unlock()
	for _, p := range r.admitIn {
		forgot = forgot || !r.known(p.UID)
	}
	if forgot {
		r.admitIn, r.admitOut = nil, nil
	}
}

// shrinkLocked makes the maps that are empty anew: a map keeps the room it
// grew to as it empties, and a churn of pods grows them to every pod in
// flight at once.
func (r *Manager) shrinkLocked() {
	if len(r.alloc) == 0 {
		r.alloc = map[types.UID]podmodel.Allocation{}
	}
	if len(r.asAllocated) == 0 {
		r.asAllocated = nil // made when needed
	}
	if len(r.pending) == 0 {
		r.pending = map[types.UID]pendingResize{}
	}
	if len(r.queued) == 0 {
		r.queued = map[types.UID]bool{}
	}
	if len(r.inProgress) == 0 {
		r.inProgress = map[types.UID]int64{}
	}
	if len(r.lastError) == 0 {
		r.lastError = map[types.UID]string{}
	}
}

// forgetUnknown forgets the pods of m the agent no longer knows, and
// reports whether there was one; r.mu is held.
func forgetUnknown[V any](r *Manager, m map[types.UID]V) bool {
	forgot := false
	for uid := range m {
		if !r.known(uid) {
			r.forgetLocked(uid)
			forgot = true
		}
	}
	return forgot
}

// allocated is the pod as allocated, and whether its spec asks for other
// resources.
func (r *Manager) allocated(pod *v1.Pod) (*v1.Pod, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	if a, ok := r.asAllocated[pod.UID]; ok && a.pod == pod {
		return a.out, a.out != pod
	}
	out, changed := podmodel.WithAllocation(pod, r.alloc[pod.UID])
	if r.asAllocated == nil {
		r.asAllocated = map[types.UID]allocatedPod{}
	}
	if !changed {
		out = pod // WithAllocation returns pod itself then: made sure of here
	}
	r.asAllocated[pod.UID] = allocatedPod{pod: pod, out: out}
	return out, changed
}

// setAllocLocked records the pod's allocation.
func (r *Manager) setAllocLocked(uid types.UID, a podmodel.Allocation) {
	if _, ok := r.alloc[uid]; ok {
		r.allocGen++
	}
	r.alloc[uid] = a
	delete(r.asAllocated, uid)
}

// Admit wraps the admission checks: they see the pod and the active pods
// as allocated (a restarted agent admits its pods with the resources it
// allocated them), and an admitted pod is allocated what it was admitted
// with, as the kubelet's allocation manager does.
func (r *Manager) Admit(hs []admission.Handler) admission.Handler {
	chain := admission.Chain(hs...)
	return admission.Func(func(pod *v1.Pod, active []*v1.Pod) admission.Result {
		pod, _ = r.allocated(pod)
		others := r.allocatedAll(active)
		res := chain.Admit(pod, others)
		if res.Admit {
			r.mu.Lock()
			if _, ok := r.alloc[pod.UID]; !ok {
				r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
				r.dirty = true
			}
			r.mu.Unlock()
		}
		return res
	})
}

// allocatedAll returns the active pods as allocated. Those of the last
// call are kept while no allocation changed: when active starts with the
// same pods, only the pods after them are looked up.
func (r *Manager) allocatedAll(active []*v1.Pod) []*v1.Pod {
	r.mu.Lock()
	gen := r.allocGen
	r.mu.Unlock()
	r.admitMu.Lock()
	defer r.admitMu.Unlock()
	from := 0
	if gen == r.admitGen && len(r.admitIn) <= len(active) {
		from = len(r.admitIn)
		for i, p := range r.admitIn {
			if active[i] != p {
				from = 0
				break
			}
		}
	}
	if from == 0 {
		r.admitIn, r.admitOut = nil, nil
	}
	for _, p := range active[from:] {
		out, _ := r.allocated(p)
		r.admitIn = append(r.admitIn, p)
		r.admitOut = append(r.admitOut, out)
	}
	r.admitGen = gen
	return slices.Clip(r.admitOut)
}

// resolve decides the pod's resize, if its spec asks for one, and returns
// the pod as allocated afterwards: the kubelet's handlePodResourcesResize.
func (r *Manager) resolve(pod *v1.Pod) *v1.Pod {
	out, _ := r.decide(pod)
	return out
}

// decide is resolve, also reporting whether it allocated a resize.
func (r *Manager) decide(pod *v1.Pod) (*v1.Pod, bool) {
	// The other pods are listed (outside the lock: the list takes the
	// pod manager's) only for a pod that asks for a resize.
	if _, asks := r.allocated(pod); !asks {
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.alloc[pod.UID]; ok {
			delete(r.pending, pod.UID)
			delete(r.queued, pod.UID)
			if r.dirty {
				r.storeLocked()
			}
			return pod, false
		}
		r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
		delete(r.pending, pod.UID)
		r.storeLocked()
		return pod, false
	}
	var others []*v1.Pod
	if r.active != nil {
		for _, p := range r.active() {
			if p.UID != pod.UID {
				others = append(others, p)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.queued, pod.UID)
	alloc, ok := r.alloc[pod.UID]
	if !ok {
		// Admitted before the checkpoint knew it (or by another path):
		// allocated as asked.
		r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
		delete(r.pending, pod.UID)
		r.storeLocked()
		return pod, false
	}
	allocated, changed := podmodel.WithAllocation(pod, alloc)
	if !changed {
		delete(r.pending, pod.UID)
		return pod, false
	}
	for i, p := range others {
		others[i], _ = podmodel.WithAllocation(p, r.alloc[p.UID])
	}
	var allocatable v1.ResourceList
	if r.allocatable != nil {
		allocatable = r.allocatable()
	}
	reason, msg := podmodel.DecideResize(pod, allocated, others, allocatable)
	if reason == "" {
		r.setAllocLocked(pod.UID, podmodel.AllocationOf(pod))
		delete(r.pending, pod.UID)
		r.storeLocked()
		// As the kubelet: a new resize clears the error of the last one.
		r.inProgress[pod.UID] = pod.Generation
		delete(r.lastError, pod.UID)
		r.log.V(1).Info("Pod resize allocated", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		r.emit(pod, v1.EventTypeNormal, podmodel.EventResizeStarted, podmodel.ResizeEventMessage("Pod resize started", pod, pod.Generation, ""))
		return pod, true
	}
	prev, had := r.pending[pod.UID]
	cond := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
	// Pending since the condition became True (its LastTransitionTime).
	since := r.now()
	if had {
		since = prev.since
	}
	r.pending[pod.UID] = pendingResize{cond: cond, since: since}
	if !had || prev.cond.Reason != reason || prev.cond.Message != msg || prev.cond.ObservedGeneration != cond.ObservedGeneration {
		r.log.Info("Pod resize pending", "pod", podmodel.FullName(pod), "podUID", pod.UID, "reason", reason, "message", msg)
		evt := podmodel.EventResizeDeferred
		if reason == v1.PodReasonInfeasible {
			evt = podmodel.EventResizeInfeasible
		}
		r.emit(pod, v1.EventTypeWarning, evt, podmodel.ResizeEventMessage("Pod resize "+reason, pod, pod.Generation, msg))
	}
	return allocated, false
}

func (r *Manager) now() time.Time {
	if r.clock == nil {
		return time.Now()
	}
	return r.clock.Now()
}

func (r *Manager) emit(pod *v1.Pod, eventtype, reason, message string) {
	if r.event != nil {
		r.event(pod, eventtype, reason, message)
	}
}

// observe follows a pod's resize from the runtime's status before a sync
// (pod as allocated), as the kubelet's SyncPod does: while a running
// container's resources differ from its allocation, or the pod cgroup's
// from the pod-level resources allocated, the resize is in progress; once they match, a resize that was is completed
// (ResizeCompleted, with the generation it was allocated at).
func (r *Manager) observe(pod *v1.Pod, ps *runtime.PodStatus) {
	if ps == nil || len(ps.SandboxStatuses) == 0 && len(ps.ContainerStatuses) == 0 {
		return // nothing known of the pod
	}
	var pc *status.PodCgroupState
	if r.podCgroup != nil {
		pc = r.podCgroup(pod)
	}
	inProgress := status.PodResizeInProgress(pod, ps, pc)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	gen, was := r.inProgress[pod.UID]
	switch {
	case inProgress && !was:
		r.inProgress[pod.UID] = pod.Generation
	case !inProgress && was:
		delete(r.inProgress, pod.UID)
		delete(r.lastError, pod.UID)
		r.log.V(1).Info("Pod resize completed", "pod", podmodel.FullName(pod), "podUID", pod.UID)
		r.emit(pod, v1.EventTypeNormal, podmodel.EventResizeCompleted, podmodel.ResizeEventMessage("Pod resize completed", pod, gen, ""))
	}
}

// observeError reports, after a sync, a failed resize in place whose
// message is new (ResizeError), as the kubelet does when it sets the
// PodResizeInProgress condition's reason Error.
func (r *Manager) observeError(pod *v1.Pod) {
	if r.resizeError == nil {
		return
	}
	msg, failed := r.resizeError(pod.UID)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	if !failed {
		delete(r.lastError, pod.UID)
		return
	}
	if r.lastError[pod.UID] == msg {
		return
	}
	r.lastError[pod.UID] = msg
	gen, ok := r.inProgress[pod.UID]
	if !ok {
		gen = pod.Generation
	}
	r.emit(pod, v1.EventTypeWarning, podmodel.EventResizeError, podmodel.ResizeEventMessage("Pod resize error", pod, gen, msg))
}

// queue makes the next retry decide the Manager the pods ask for, first
// of all; it reports whether one does.
func (r *Manager) queue(pods []*v1.Pod) bool {
	found := false
	for _, p := range pods {
		if _, asks := r.allocated(p); !asks {
			continue
		}
		r.mu.Lock()
		if _, ok := r.alloc[p.UID]; ok {
			r.queued[p.UID] = true
			found = true
		}
		r.mu.Unlock()
	}
	return found
}

// terminated forgets the resize state of a pod whose containers all
// stopped for good (its allocation stays until the pod is gone).
func (r *Manager) terminated(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	delete(r.pending, uid)
	delete(r.queued, uid)
	delete(r.inProgress, uid)
	delete(r.lastError, uid)
}

// hasDeferred reports whether a resize is deferred or queued.
func (r *Manager) hasDeferred() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadLocked()
	if len(r.queued) > 0 {
		return true
	}
	for _, p := range r.pending {
		if p.cond.Reason == v1.PodReasonDeferred {
			return true
		}
	}
	return false
}

// retryPending decides again the deferred (and queued) Manager, as the
// kubelet's allocation manager does when a pod is resized, added or
// removed, when one terminates, and periodically: in the kubelet's order
// (those that ask for no more requests, then higher priority, then
// Guaranteed pods, then the longest pending), each pod whose resize was
// allocated or whose PodResizePending changed synced at once. Nothing is
// retried until every pod source is ready, the other pods not all known.
func (r *Manager) retryPending(trigger string) {
	if r.podByUID == nil {
		return
	}
	if r.sourcesReady != nil && !r.sourcesReady() {
		r.log.V(4).Info("Not retrying pending Manager: the pod sources are not ready", "trigger", trigger)
		r.schedule(initialRetryDelay)
		return
	}
	r.schedule(retryDelay)
	type candidate struct {
		pod        *v1.Pod
		increasing bool
		since      time.Time // zero: not pending yet
	}
	r.mu.Lock()
	r.loadLocked()
	var uids []types.UID
	for uid := range r.queued {
		uids = append(uids, uid)
	}
	for uid, p := range r.pending {
		if p.cond.Reason == v1.PodReasonDeferred && !r.queued[uid] {
			uids = append(uids, uid)
		}
	}
	r.mu.Unlock()
	var cands []candidate
	for _, uid := range uids {
		pod, ok := r.podByUID(uid)
		if !ok {
			r.mu.Lock()
			delete(r.pending, uid)
			delete(r.queued, uid)
			r.mu.Unlock()
			continue
		}
		allocated, _ := r.allocated(pod)
		want, had := podmodel.Requests(pod), podmodel.Requests(allocated)
		c := candidate{pod: pod, increasing: want.Cpu().Cmp(*had.Cpu()) > 0 || want.Memory().Cmp(*had.Memory()) > 0}
		r.mu.Lock()
		if p, ok := r.pending[uid]; ok {
			c.since = p.since
		}
		r.mu.Unlock()
		cands = append(cands, c)
	}
	priority := func(p *v1.Pod) int32 {
		if p.Spec.Priority == nil {
			return 0
		}
		return *p.Spec.Priority
	}
	guaranteed := func(p *v1.Pod) bool { return podmodel.QOSClass(p) == v1.PodQOSGuaranteed }
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if a.increasing != b.increasing {
			if !a.increasing {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(priority(b.pod), priority(a.pod)); c != 0 {
			return c
		}
		if ga, gb := guaranteed(a.pod), guaranteed(b.pod); ga != gb {
			if ga {
				return -1
			}
			return 1
		}
		switch {
		case a.since.IsZero() && b.since.IsZero():
			return 0
		case a.since.IsZero():
			return 1
		case b.since.IsZero():
			return -1
		}
		return a.since.Compare(b.since)
	})
	for _, c := range cands {
		before := r.PendingResize(c.pod.UID)
		_, allocated := r.decide(c.pod)
		after := r.PendingResize(c.pod.UID)
		if allocated || !apiequality.Semantic.DeepEqual(before, after) {
			if allocated && before != nil && before.Reason == v1.PodReasonDeferred {
				r.log.Info("Deferred pod resize allocated", "pod", podmodel.FullName(c.pod), "podUID", c.pod.UID, "trigger", trigger)
			}
			if r.triggerSync != nil {
				r.triggerSync(c.pod)
			}
		}
	}
}

// schedule sets the delay of the next periodic retry and tells Run.
func (r *Manager) schedule(d time.Duration) {
	r.mu.Lock()
	r.next = d
	task := r.task
	r.mu.Unlock()
	if task != nil {
		task.Reset(d)
		return
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run retries the deferred Manager periodically (initialRetryDelay after
// the start, then retryDelay after the last retry, whatever its trigger)
// until ctx ends.
func (r *Manager) Run(ctx context.Context) error { return run.Until(ctx, r) }

// Start is Run without waiting for ctx to end (run.Starter). With
// Config.Periodic the retries are a task of the Driver's.
func (r *Manager) Start(ctx context.Context) (wait func(), err error) {
	if d := r.periodic; d != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.task = d.Start(ctx, initialRetryDelay, func(context.Context) time.Duration {
			r.retryPending(triggerPeriodic) // its schedule moves the next
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.next
		})
		return r.task.Wait, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.loop(ctx)
	}()
	return func() { <-done }, nil
}

// loop is Run's loop without a Driver.
func (r *Manager) loop(ctx context.Context) {
	clk := r.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	t := clk.NewTimer(initialRetryDelay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			if !t.Stop() {
				select {
				case <-t.C():
				default:
				}
			}
			r.mu.Lock()
			next := r.next
			r.mu.Unlock()
			t.Reset(next)
		case <-t.C():
			r.retryPending(triggerPeriodic)
		}
	}
}

// PendingResize is the PodResizePending condition of the pod, nil when
// none (podsync.PodResizes).
func (r *Manager) PendingResize(uid types.UID) *v1.PodCondition {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[uid]
	if !ok {
		return nil
	}
	c := p.cond
	return &c
}

// WrapSync makes the pod workers' sync run each pod as allocated, deciding
// its resize first.
func (r *Manager) WrapSync(s podworker.SyncFuncs) podworker.SyncFuncs {
	return resizingSyncFuncs{SyncFuncs: s, r: r}
}

type resizingSyncFuncs struct {
	podworker.SyncFuncs
	r *Manager
}

func (s resizingSyncFuncs) SyncPod(ctx context.Context, updateType podworker.UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error) {
	pod = s.r.resolve(pod)
	s.r.observe(pod, podStatus)
	terminal, err := s.SyncFuncs.SyncPod(ctx, updateType, pod, podStatus)
	s.r.observeError(pod)
	// The status the sync read after its work: a resize it finished is
	// completed now, as the pod's status says, not at the next sync.
	if s.r.cached != nil {
		s.r.observe(pod, s.r.cached(pod.UID))
	}
	return terminal, err
}

func (s resizingSyncFuncs) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, edit func(*v1.PodStatus)) error {
	pod, _ = s.r.allocated(pod)
	return s.SyncFuncs.SyncTerminatingPod(ctx, pod, podStatus, gracePeriod, edit)
}

// SyncTerminatedPod runs once the pod's containers stopped: what it was
// allocated is free, so the deferred Manager are retried (the kubelet's
// pod_terminated trigger).
func (s resizingSyncFuncs) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error {
	allocated, _ := s.r.allocated(pod)
	err := s.SyncFuncs.SyncTerminatedPod(ctx, allocated, podStatus)
	if err != nil {
		return err
	}
	s.r.terminated(pod.UID)
	if s.r.hasDeferred() {
		s.r.retryPending(triggerPodTerminated)
	}
	return err
}

// WrapHandler makes the sync loop's handler retry the deferred Manager
// on the kubelet's triggers: a pod update that asks for a resize, pods
// added that ask for one (a restarted agent), pods removed.
func (r *Manager) WrapHandler(h syncloop.SyncHandler) syncloop.SyncHandler {
	return resizingHandler{SyncHandler: h, r: r}
}

type resizingHandler struct {
	syncloop.SyncHandler
	r *Manager
}

func (h resizingHandler) HandlePodAdditions(ctx context.Context, pods []*v1.Pod) {
	h.SyncHandler.HandlePodAdditions(ctx, pods)
	if h.r.queue(pods) {
		h.r.retryPending(triggerPodsAdded)
	}
}

func (h resizingHandler) HandlePodUpdates(ctx context.Context, pods []*v1.Pod) {
	h.SyncHandler.HandlePodUpdates(ctx, pods)
	if h.r.queue(pods) {
		h.r.retryPending(triggerPodResized)
	}
}

// HandlePodCleanups is housekeeping: the allocation state of pods that
// are gone goes too.
func (h resizingHandler) HandlePodCleanups(ctx context.Context) error {
	err := h.SyncHandler.HandlePodCleanups(ctx)
	h.r.removeOrphans()
	return err
}

// HousekeepingSettled forwards the wrapped handler's
// (syncloop.HousekeepingSettler): what HandlePodCleanups adds, forgetting
// the allocations of pods no longer known, depends only on the pods,
// which change through the loop.
func (h resizingHandler) HousekeepingSettled() bool {
	s, ok := h.SyncHandler.(syncloop.HousekeepingSettler)
	return ok && s.HousekeepingSettled()
}

func (h resizingHandler) HandlePodRemoves(ctx context.Context, pods []*v1.Pod) {
	h.SyncHandler.HandlePodRemoves(ctx, pods)
	if h.r.hasDeferred() {
		h.r.retryPending(triggerPodsRemoved)
	}
}
