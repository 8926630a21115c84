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
// loop calls GetWork every second and sends a SyncPodSync update for each
// pod it returns.
//
// A pod is in the queue at most once, due at the earliest time anyone
// asked for: a resync requested in a minute does not postpone a retry
// requested in ten seconds (a container whose restart back-off ends then). Queue reads the time with time.Now, so it follows a synctest
// bubble's fake clock. It is safe for concurrent use; the zero value is an
// empty queue.
type Queue struct {
	mu  sync.Mutex
	due map[types.UID]time.Time
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{due: map[types.UID]time.Time{}}
}

// Enqueue makes the pod due after delay, unless it is already due sooner.
func (q *Queue) Enqueue(uid types.UID, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.due == nil {
		q.due = map[types.UID]time.Time{}
	}
	at := time.Now().Add(delay)
	if cur, ok := q.due[uid]; ok && cur.Before(at) {
		return
	}
	q.due[uid] = at
}

// GetWork removes and returns, sorted, the pods whose due time has come.
func (q *Queue) GetWork() []types.UID {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	var uids []types.UID
	for uid, t := range q.due {
		if !t.After(now) {
			uids = append(uids, uid)
			delete(q.due, uid)
		}
	}
	slices.Sort(uids)
	return uids
}
