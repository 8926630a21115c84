package pleg

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ Cache = (*StatusCache)(nil)

// StatusCache is the Cache a PLEG keeps: the newest runtime status of every
// pod, with the time it was read, and the time of the last complete
// refresh. It is safe for concurrent use. Its memory is bounded by the
// pods it holds and the readers waiting in GetNewerThan and Await.
type StatusCache struct {
	mu sync.Mutex
	// pods holds the newest status of each pod.
	pods map[types.UID]*cacheEntry
	// refreshed is the time of the last UpdateTime: every entry is valid
	// as of then.
	refreshed time.Time
	// waiters are the GetNewerThan and Await calls still waiting, by pod.
	waiters map[types.UID][]*waiter
	// changes counts the entries set and deleted; failed counts the
	// entries that hold a failed read.
	changes uint64
	failed  int
	// live: a PLEG that receives every change as it happens (the evented
	// one while its stream works) keeps the cache current, so the
	// readers of Pods, RunningContainers, NotRunning,
	// EachRunningContainer and Changes take it as refreshed now (see
	// SetLive).
	live bool
	// newerWaited receives a value when a GetNewerThan call starts
	// waiting; nil until NewerWaited is first called.
	newerWaited chan struct{}
}

type cacheEntry struct {
	status   *runtime.PodStatus
	err      error
	modified time.Time
}

// waiter is one GetNewerThan call waiting for a status newer than
// minTime, or an Await call waiting for any change (any).
type waiter struct {
	minTime time.Time
	any     bool
	ready   chan cacheEntry // capacity 1; receives once
}

// NewCache returns an empty StatusCache.
func NewCache() *StatusCache {
	return &StatusCache{
		pods:    make(map[types.UID]*cacheEntry),
		waiters: make(map[types.UID][]*waiter),
	}
}

// Get returns the cached status of the pod and the error of its last
// inspection; for a pod the cache does not hold, an empty status with
// only the ID set, and no error.
func (c *StatusCache) Get(uid types.UID) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok {
		return e.status, e.err
	}
	return &runtime.PodStatus{ID: uid}, nil
}

// GetNewerThan returns the pod's status once the cache holds one read
// after minTime, or once the whole cache was refreshed (UpdateTime) after
// minTime: then the pod's entry, or an empty status if the pod has none.
// It returns ctx.Err() if ctx ends first.
func (c *StatusCache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	if e, ok := c.newerLocked(uid, minTime); ok {
		c.mu.Unlock()
		return e.status, e.err
	}
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	w := &waiter{minTime: minTime, ready: make(chan cacheEntry, 1)}
	if c.waiters == nil {
		c.waiters = make(map[types.UID][]*waiter)
	}
	c.waiters[uid] = append(c.waiters[uid], w)
	if c.newerWaited != nil {
		select {
		case c.newerWaited <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()

	select {
	case e := <-w.ready:
		return e.status, e.err
	case <-ctx.Done():
		c.mu.Lock()
		c.removeWaiterLocked(uid, w)
		c.mu.Unlock()
		// The entry may have arrived while ctx ended: prefer it.
		select {
		case e := <-w.ready:
			return e.status, e.err
		default:
			return nil, ctx.Err()
		}
	}
}

// Await returns the pod's status once cond holds for it, or ctx's error
// if ctx ends first. cond sees the pod's status now, then after each
// change of the pod's entry (a status set, the entry deleted) and each
// refresh of the cache; it sees nil while the cache holds no status of
// the pod or its last read failed, and Await then returns nil if cond
// holds. cond must not keep or change its argument.
func (c *StatusCache) Await(ctx context.Context, uid types.UID, cond func(*runtime.PodStatus) bool) (*runtime.PodStatus, error) {
	// One waiter for every turn: a wake-up took it off the pod's waiters
	// and emptied its channel.
	w := &waiter{any: true, ready: make(chan cacheEntry, 1)}
	for {
		// The waiter goes in before the entry is checked, so that a Set
		// between the check and the wait is not missed.
		c.mu.Lock()
		e, ok := c.pods[uid]
		if c.waiters == nil {
			c.waiters = make(map[types.UID][]*waiter)
		}
		c.waiters[uid] = append(c.waiters[uid], w)
		c.mu.Unlock()
		var st *runtime.PodStatus
		if ok && e.err == nil {
			st = e.status
		}
		if cond(st) {
			c.mu.Lock()
			c.removeWaiterLocked(uid, w)
			c.mu.Unlock()
			return st, nil
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			c.mu.Lock()
			c.removeWaiterLocked(uid, w)
			c.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// NewerWaited returns a channel that receives a value when a
// GetNewerThan call starts waiting: a PLEG that refreshes the cache only
// for such readers (UpdateTime) waits on it rather than refreshing
// periodically for none. Call it from the goroutine that receives.
func (c *StatusCache) NewerWaited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newerWaited == nil {
		c.newerWaited = make(chan struct{}, 1)
	}
	return c.newerWaited
}

// WaitingNewer reports whether a GetNewerThan call waits.
func (c *StatusCache) WaitingNewer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ws := range c.waiters {
		for _, w := range ws {
			if !w.any {
				return true
			}
		}
	}
	return false
}

// SetLive tells whether the cache is live: its PLEG receives every change
// of the runtime's pods as it happens and puts it in the cache at once
// (the evented PLEG while its event stream works), so that it is current
// without a refresh. While it is, Pods, RunningContainers, NotRunning,
// EachRunningContainer and Changes take it as refreshed now, whatever
// their since; GetNewerThan still waits for a status read or a refresh
// after its minTime.
func (c *StatusCache) SetLive(live bool) {
	c.mu.Lock()
	c.live = live
	c.mu.Unlock()
}

// staleLocked reports whether the cache was not refreshed at or after
// since and is not live.
func (c *StatusCache) staleLocked(since time.Time) bool {
	return !c.live && c.refreshed.Before(since)
}

// newerLocked returns the entry a reader waiting for minTime may take.
func (c *StatusCache) newerLocked(uid types.UID, minTime time.Time) (cacheEntry, bool) {
	e, ok := c.pods[uid]
	refreshed := !c.refreshed.IsZero() && c.refreshed.After(minTime)
	switch {
	case ok && (refreshed || e.modified.After(minTime)):
		return *e, true
	case !ok && refreshed:
		return cacheEntry{status: &runtime.PodStatus{ID: uid}}, true
	}
	return cacheEntry{}, false
}

func (c *StatusCache) removeWaiterLocked(uid types.UID, w *waiter) {
	ws := c.waiters[uid]
	if i := slices.Index(ws, w); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		c.deleteWaitersLocked(uid)
		return
	}
	c.waiters[uid] = ws
}

// deleteWaitersLocked forgets the pod's waiters. The map is dropped when
// it empties: a burst of pod starts grows it to every pod, and a map never
// gives back the room it grew.
func (c *StatusCache) deleteWaitersLocked(uid types.UID) {
	delete(c.waiters, uid)
	if len(c.waiters) == 0 {
		c.waiters = nil
	}
}

// notifyLocked hands the pod's entry to every waiter it satisfies.
func (c *StatusCache) notifyLocked(uid types.UID) {
	ws := c.waiters[uid]
	if len(ws) == 0 {
		return
	}
	kept := ws[:0]
	for _, w := range ws {
		if w.any {
			w.ready <- cacheEntry{}
			continue
		}
		if e, ok := c.newerLocked(uid, w.minTime); ok {
			w.ready <- e
			continue
		}
		kept = append(kept, w)
	}
	clear(ws[len(kept):])
	if len(kept) == 0 {
		c.deleteWaitersLocked(uid)
		return
	}
	c.waiters[uid] = kept
}

// Set records the pod's status (or the error reading it) as read at
// timestamp, unless the cache already holds an entry read later. A nil
// status is stored as an empty status with only the ID set.
func (c *StatusCache) Set(uid types.UID, status *runtime.PodStatus, err error, timestamp time.Time) {
	if status == nil {
		status = &runtime.PodStatus{ID: uid}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	if ok && e.modified.After(timestamp) {
		return
	}
	if ok && e.err != nil {
		c.failed--
	}
	if err != nil {
		c.failed++
	}
	c.changes++
	c.pods[uid] = &cacheEntry{status: status, err: err, modified: timestamp}
	c.notifyLocked(uid)
}

// ReadAt returns when the pod's status held in the cache was read, and
// false when the cache holds no status of the pod or its last read failed.
func (c *StatusCache) ReadAt(uid types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok && e.err == nil {
		return e.modified, true
	}
	return time.Time{}, false
}

// Pods returns what the runtime holds of every pod in the cache (all
// containers and sandboxes, newest first, as podruntime.Manager.GetPods with
// all set lists them, sorted by pod ID), provided the cache is live
// (SetLive) or was refreshed (UpdateTime) at or after since and holds no failed read. Otherwise it
// returns false, and the caller lists the runtime itself. A PLEG of this
// package puts every pod of the runtime in its cache, so while it keeps
// the cache current, the runtime's pods can be read here without a call
// to the runtime.
func (c *StatusCache) Pods(since time.Time) ([]*runtime.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staleLocked(since) {
		return nil, false
	}
	out := make([]*runtime.Pod, 0, len(c.pods))
	for uid, e := range c.pods {
		if e.err != nil {
			return nil, false
		}
		st := e.status
		p := &runtime.Pod{ID: uid, Name: st.Name, Namespace: st.Namespace}
		if n := len(st.ContainerStatuses); n > 0 {
			p.Containers = make([]*runtime.Container, n)
			for i, cs := range st.ContainerStatuses {
				p.Containers[i] = &runtime.Container{
					ID: cs.ID, Name: cs.Name, Image: cs.Image, Hash: cs.Hash, State: cs.State, CreatedAt: cs.CreatedAt.UnixNano(),
				}
			}
		}
		if n := len(st.SandboxStatuses); n > 0 {
			p.Sandboxes = make([]*runtime.Container, n)
			for i, sb := range st.SandboxStatuses {
				p.Sandboxes[i] = &runtime.Container{
					ID: sb.GetId(), Name: sb.GetMetadata().GetName(), State: sandboxContainerState(sb.GetState()), CreatedAt: sb.GetCreatedAt(),
				}
			}
		}
		if len(p.Containers)+len(p.Sandboxes) == 0 {
			continue // nothing left in the runtime
		}
		newest := func(a, b *runtime.Container) int {
			return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(a.ID, b.ID))
		}
		slices.SortFunc(p.Containers, newest)
		slices.SortFunc(p.Sandboxes, newest)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *runtime.Pod) int { return cmp.Compare(a.ID, b.ID) })
	return out, true
}

// RunningContainers returns the running containers of every pod in the
// cache, as a CRI ListContainers filtered on the running state lists them
// (ID, sandbox, name, image, state and creation time set), provided the cache is
// live or was refreshed at or after since and holds no failed read. Otherwise it
// returns false, and the caller lists the runtime itself.
func (c *StatusCache) RunningContainers(since time.Time) ([]*runtimeapi.Container, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staleLocked(since) || c.failed > 0 {
		return nil, false
	}
	var out []*runtimeapi.Container
	for _, e := range c.pods {
		for _, cs := range e.status.ContainerStatuses {
			if cs.State != runtime.ContainerStateRunning {
				continue
			}
			out = append(out, &runtimeapi.Container{
				Id:           cs.ID,
				PodSandboxId: cs.SandboxID,
				Metadata:     &runtimeapi.ContainerMetadata{Name: cs.Name},
				Image:        &runtimeapi.ImageSpec{Image: cs.Image},
				ImageRef:     cs.ImageRef,
				State:        runtimeapi.ContainerState_CONTAINER_RUNNING,
				CreatedAt:    cs.CreatedAt.UnixNano(),
			})
		}
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int { return cmp.Compare(a.Id, b.Id) })
	return out, true
}

// NotRunning returns, as CRI ListContainers and ListPodSandbox list them
// (ID, sandbox, metadata, the pod UID and container name labels, state
// and creation time set), the containers and sandboxes of every pod in
// the cache that has a container not running or a sandbox not ready,
// provided the cache is live or was refreshed at or after since and holds no failed
// read; otherwise it returns false, and the caller lists the runtime
// itself. A pod whose containers all run in ready sandboxes is left out:
// a garbage collection has nothing of it to remove (package gc), and an
// idle node's collection then costs in proportion to what is dead rather
// than to what runs. The sandboxes' metadata is shared with the cache:
// treat it as read-only.
func (c *StatusCache) NotRunning(since time.Time) (containers []*runtimeapi.Container, sandboxes []*runtimeapi.PodSandbox, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staleLocked(since) || c.failed > 0 {
		return nil, nil, false
	}
	for uid, e := range c.pods {
		st := e.status
		if st == nil || !anyNotRunning(st) {
			continue
		}
		for _, cs := range st.ContainerStatuses {
			containers = append(containers, &runtimeapi.Container{
				Id:           cs.ID,
				PodSandboxId: cs.SandboxID,
				Metadata:     &runtimeapi.ContainerMetadata{Name: cs.Name},
				Labels:       map[string]string{runtime.LabelPodUID: string(uid), runtime.LabelContainerName: cs.Name},
				Image:        &runtimeapi.ImageSpec{Image: cs.Image},
				ImageRef:     cs.ImageRef,
				State:        criContainerState(cs.State),
				CreatedAt:    cs.CreatedAt.UnixNano(),
			})
		}
		for _, sb := range st.SandboxStatuses {
			sandboxes = append(sandboxes, &runtimeapi.PodSandbox{
				Id:        sb.GetId(),
				Metadata:  sb.GetMetadata(),
				State:     sb.GetState(),
				CreatedAt: sb.GetCreatedAt(),
			})
		}
	}
	slices.SortFunc(containers, func(a, b *runtimeapi.Container) int { return cmp.Compare(a.Id, b.Id) })
	slices.SortFunc(sandboxes, func(a, b *runtimeapi.PodSandbox) int { return cmp.Compare(a.Id, b.Id) })
	return containers, sandboxes, true
}

// anyNotRunning reports whether the pod has a container not running or a
// sandbox not ready.
func anyNotRunning(st *runtime.PodStatus) bool {
	for _, cs := range st.ContainerStatuses {
		if cs.State != runtime.ContainerStateRunning {
			return true
		}
	}
	for _, sb := range st.SandboxStatuses {
		if sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

// criContainerState is the CRI state of a container in state s.
func criContainerState(s runtime.ContainerState) runtimeapi.ContainerState {
	switch s {
	case runtime.ContainerStateCreated:
		return runtimeapi.ContainerState_CONTAINER_CREATED
	case runtime.ContainerStateRunning:
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	case runtime.ContainerStateExited:
		return runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return runtimeapi.ContainerState_CONTAINER_UNKNOWN
}

// EachRunningContainer calls fn with each running container the cache
// holds and the status of its pod, and reports true, when the cache was
// refreshed since since and holds no failed read, as RunningContainers;
// it reports false, without calling fn, otherwise. fn runs under the
// cache's lock: it must not call the cache, nor keep or change its
// arguments.
func (c *StatusCache) EachRunningContainer(since time.Time, fn func(pod *runtime.PodStatus, cs *runtime.ContainerStatus)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staleLocked(since) || c.failed > 0 {
		return false
	}
	for _, e := range c.pods {
		if e.status == nil {
			continue
		}
		for _, cs := range e.status.ContainerStatuses {
			if cs.State == runtime.ContainerStateRunning {
				fn(e.status, cs)
			}
		}
	}
	return true
}

// Delete forgets the pod. Readers waiting in GetNewerThan keep waiting;
// those in Await see the pod without a status.
func (c *StatusCache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	if !ok {
		return
	}
	if e.err != nil {
		c.failed--
	}
	c.changes++
	delete(c.pods, uid)
	c.shrinkLocked()
	c.notifyLocked(uid)
}

// shrinkLocked makes the maps anew once they are empty: a map gives back
// none of the room it grew to as it empties, and a churn of pods grows
// them to every pod in flight at once.
func (c *StatusCache) shrinkLocked() {
	if len(c.pods) == 0 {
		c.pods = make(map[types.UID]*cacheEntry)
	}
	if len(c.waiters) == 0 {
		c.waiters = make(map[types.UID][]*waiter)
	}
}

// Prune forgets the pods keep does not want whose status holds nothing
// of the runtime (no sandbox, no container) or a failed read, unless a
// reader waits for them, and returns them. Housekeeping calls it with the
// pods it still knows: a pod read after its objects were removed, or one
// stopped before it made any, is in the cache with no event or relist to
// take it out.
func (c *StatusCache) Prune(keep func(types.UID) bool) []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []types.UID
	for uid, e := range c.pods {
		if keep(uid) || len(c.waiters[uid]) > 0 {
			continue
		}
		if e.err == nil && e.status != nil && len(e.status.SandboxStatuses)+len(e.status.ContainerStatuses) > 0 {
			continue
		}
		if e.err != nil {
			c.failed--
		}
		c.changes++
		delete(c.pods, uid)
		gone = append(gone, uid)
	}
	if len(gone) > 0 {
		c.shrinkLocked()
	}
	return gone
}

// Changes returns a count of the entries set and deleted so far, and
// whether Pods(since) would answer from the cache: a reader that computed
// something from Pods can tell by the count that nothing was set or
// deleted since, without reading the pods again.
func (c *StatusCache) Changes(since time.Time) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes, !c.staleLocked(since) && c.failed == 0
}

// UpdateTime records that every entry is valid as of timestamp, and wakes
// the readers this satisfies. A timestamp older than the last one is
// ignored.
func (c *StatusCache) UpdateTime(timestamp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !timestamp.After(c.refreshed) {
		return
	}
	c.refreshed = timestamp
	for uid := range c.waiters {
		c.notifyLocked(uid)
	}
}

// sandboxContainerState is a sandbox's state as podruntime.Manager.GetPods
// reports it: running while ready, exited otherwise.
func sandboxContainerState(s runtimeapi.PodSandboxState) runtime.ContainerState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return runtime.ContainerStateRunning
	}
	return runtime.ContainerStateExited
}
