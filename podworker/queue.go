package podworker

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Queue records when each pod is next due for a sync, the kubelet's work
// queue. The pod workers put a pod in it after every sync (the resync
// interval after a success, the back-off period after an error); the sync
// loop calls GetWork at its first one-second tick at or after the earliest
// pod is due (NextDue, Earlier: an idle loop does not wake every second),
// and at once when Woken signals (a pod queued with Wake is due), and
// sends a SyncPodSync update for each pod it returns.
//
// A pod is in the queue at most once, due at the earliest time anyone
// asked for: a resync requested in a minute does not postpone a retry
// requested in ten seconds (a container whose restart back-off ends then).
// Queue reads the time with time.Now, so it follows a synctest bubble's
// fake clock. It is safe for concurrent use; the zero value is an empty
// queue.
//
// The pods are kept in a min-heap by due time, so GetWork costs
// O(k log n) for k due pods out of n, and nothing when none is due: an
// idle node with many pods pays nothing for the sync loop's second-by-second
// poll. (The kubelet's queue walks every pod on each GetWork.)
type Queue struct {
	mu sync.Mutex
	// woken is signalled (without blocking) when a pod queued with Wake
	// comes due: wakes holds each such pod's time, and wakeTimer fires at
	// the earliest, wakeAt.
	woken chan struct{}
	// earlier is signalled (without blocking) when a pod becomes the
	// earliest due (see Earlier).
	earlier   chan struct{}
	wakes     map[types.UID]time.Time
	wakeAt    time.Time
	wakeTimer *time.Timer
	// fired are the pods whose wake-up fired and whose worker has not
	// synced them since (see takeFired).
	fired map[types.UID]bool
	// base is the time due times are counted from, set by the first
	// Enqueue; an entry holds an offset from it, which is smaller than a
	// time.Time and compares with the monotonic clock.
	base time.Time
	// heap is a binary min-heap by at; index maps each pod to its entry's
	// position in heap.
	heap  []queueEntry
	index map[types.UID]int
}

// queueEntry is one pod in the queue: due at base+at.
type queueEntry struct {
	uid types.UID
	at  time.Duration
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{}
}

// Enqueue makes the pod due after delay, unless it is already due sooner.
func (q *Queue) Enqueue(uid types.UID, delay time.Duration) {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.index == nil {
		q.index = map[types.UID]int{}
	}
	if q.base.IsZero() {
		q.base = now
	}
	at := now.Sub(q.base) + delay
	if i, ok := q.index[uid]; ok {
		if q.heap[i].at <= at {
			return
		}
		q.heap[i].at = at
		q.up(i)
	} else {
		q.heap = append(q.heap, queueEntry{uid: uid, at: at})
		q.index[uid] = len(q.heap) - 1
		q.up(len(q.heap) - 1)
	}
	if q.index[uid] == 0 {
		select {
		case q.earlierLocked() <- struct{}{}:
		default: // a signal is already pending
		}
	}
}

// NextDue returns when the earliest pod in the queue is due, false when
// the queue is empty: the sync loop sleeps until the first of its ticks at
// or after that time (syncloop.DueQueue) rather than polling every tick.
func (q *Queue) NextDue() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.heap) == 0 {
		return time.Time{}, false
	}
	return q.base.Add(q.heap[0].at), true
}

// Earlier receives a value when a pod becomes the earliest due (Enqueue,
// Wake), so that a loop waiting for NextDue looks again. It is never
// closed.
func (q *Queue) Earlier() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.earlierLocked()
}

func (q *Queue) earlierLocked() chan struct{} {
	if q.earlier == nil {
		q.earlier = make(chan struct{}, 1)
	}
	return q.earlier
}

// Wake makes the pod due after delay, as Enqueue does, and signals Woken
// when that time comes, so that the sync loop takes the pod at once rather
// than at its next tick: for a time that matters to the second, such as a
// pod's active deadline. A pod has at most one wake-up, the earliest asked
// for; it is dropped once it fired.
func (q *Queue) Wake(uid types.UID, delay time.Duration) {
	q.Enqueue(uid, delay)
	delay = max(delay, 0)
	at := time.Now().Add(delay)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.wakes == nil {
		q.wakes = map[types.UID]time.Time{}
	}
	if old, ok := q.wakes[uid]; ok && !at.Before(old) {
		return
	}
	q.wakes[uid] = at
	if q.wakeTimer == nil || at.Before(q.wakeAt) {
		q.armLocked(at)
	}
}

// armLocked sets the wake-up timer to fire at at.
func (q *Queue) armLocked(at time.Time) {
	if q.wakeTimer != nil {
		q.wakeTimer.Stop()
	}
	q.wakeAt = at
	q.wakeTimer = time.AfterFunc(time.Until(at), q.fire)
}

// fire signals Woken, drops the wake-ups that came due and arms the timer
// for the next one.
func (q *Queue) fire() {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wakeTimer = nil
	var next time.Time
	for uid, at := range q.wakes {
		switch {
		case !at.After(now):
			delete(q.wakes, uid)
			if q.fired == nil {
				q.fired = map[types.UID]bool{}
			}
			q.fired[uid] = true
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	if len(q.wakes) == 0 {
		q.wakes = nil
	}
	if !next.IsZero() {
		q.armLocked(next)
	}
	select {
	case q.wokenLocked() <- struct{}{}:
	default: // a signal is already pending
	}
}

// takeFired reports whether the pod's wake-up fired since its worker last
// asked, and forgets it: the worker syncs such a pod on the status it
// holds rather than waiting for a newer one, since what is due is a
// matter of time, not of the runtime.
func (q *Queue) takeFired(uid types.UID) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.fired[uid] {
		return false
	}
	delete(q.fired, uid)
	if len(q.fired) == 0 {
		q.fired = nil
	}
	return true
}

// wakeTime returns the time of the pod's wake-up that has not fired yet.
func (q *Queue) wakeTime(uid types.UID) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	at, ok := q.wakes[uid]
	return at, ok
}

// Woken receives a value when a pod queued with Wake is due; the sync loop
// then calls GetWork. It is never closed.
func (q *Queue) Woken() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wokenLocked()
}

func (q *Queue) wokenLocked() chan struct{} {
	if q.woken == nil {
		q.woken = make(chan struct{}, 1)
	}
	return q.woken
}

// GetWork removes and returns, sorted, the pods whose due time has come.
func (q *Queue) GetWork() []types.UID {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.heap) == 0 {
		return nil
	}
	at := now.Sub(q.base)
	var uids []types.UID
	for len(q.heap) > 0 && q.heap[0].at <= at {
		uids = append(uids, q.pop())
	}
	if len(q.heap) == 0 {
		// A burst may have grown them to every pod; neither gives back
		// its room otherwise.
		q.heap, q.index = nil, nil
	}
	slices.Sort(uids)
	return uids
}

// remove takes the pod out of the queue, if it is in it, with its
// wake-up, fired or not: a pod whose worker is forgotten is due no more.
func (q *Queue) remove(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.wakes, uid)
	if len(q.wakes) == 0 {
		q.wakes = nil
	}
	delete(q.fired, uid)
	if len(q.fired) == 0 {
		q.fired = nil
	}
	i, ok := q.index[uid]
	if !ok {
		return
	}
	last := len(q.heap) - 1
	q.swap(i, last)
	q.heap[last] = queueEntry{}
	q.heap = q.heap[:last]
	delete(q.index, uid)
	if i < last {
		q.down(i)
		q.up(i)
	}
	if len(q.heap) == 0 {
		q.heap, q.index = nil, nil
	}
}

// Len returns how many pods are in the queue.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.heap)
}

// pop removes the earliest entry and returns its pod.
func (q *Queue) pop() types.UID {
	uid := q.heap[0].uid
	last := len(q.heap) - 1
	q.swap(0, last)
	q.heap[last] = queueEntry{}
	q.heap = q.heap[:last]
	delete(q.index, uid)
	if last > 0 {
		q.down(0)
	}
	return uid
}

func (q *Queue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.index[q.heap[i].uid] = i
	q.index[q.heap[j].uid] = j
}

// up moves entry i towards the root while it is due before its parent.
func (q *Queue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if q.heap[parent].at <= q.heap[i].at {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down moves entry i towards the leaves while a child is due before it.
func (q *Queue) down(i int) {
	n := len(q.heap)
	for {
		least := i
		if l := 2*i + 1; l < n && q.heap[l].at < q.heap[least].at {
			least = l
		}
		if r := 2*i + 2; r < n && q.heap[r].at < q.heap[least].at {
			least = r
		}
		if least == i {
			return
		}
		q.swap(i, least)
		i = least
	}
}
