package probe

import (
	"sync"
	"sync/atomic"

	"github.com/nodekit/nodekit/podmodel"
	"k8s.io/apimachinery/pkg/types"
)

// updatesCapacity is the capacity of each result channel, the kubelet's.
const updatesCapacity = 20

// results holds the current result of one probe type for each container,
// keyed by the runtime's container ID. It is safe for concurrent use.
type results struct {
	mu      sync.RWMutex
	m       map[string]resultEntry
	updates chan Update
	// changes counts the results changed or removed.
	changes atomic.Uint64
}

type resultEntry struct {
	result Result
	podUID types.UID
	// owner is the worker that set the result; only it removes it.
	owner *worker
}

func newResults() *results {
	return &results{m: make(map[string]resultEntry), updates: make(chan Update, updatesCapacity)}
}

func (s *results) get(id string) (Result, bool) {
	s.mu.RLock()
	e, ok := s.m[id]
	s.mu.RUnlock()
	return e.result, ok
}

// set records the container's result and reports whether it changed (the
// container had no result or another one); the caller then publishes it.
func (s *results) set(id string, r Result, podUID types.UID, owner *worker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if ok && e.result == r && e.owner == owner {
		return false
	}
	s.m[id] = resultEntry{result: r, podUID: podUID, owner: owner}
	changed := !ok || e.result != r
	if changed {
		s.changes.Add(1)
	}
	return changed
}

// remove forgets the container's result if owner set it.
func (s *results) remove(id string, owner *worker) {
	s.mu.Lock()
	if e, ok := s.m[id]; ok && e.owner == owner {
		delete(s.m, id)
		s.changes.Add(1)
	}
	s.mu.Unlock()
}

func (s *results) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// runtimeID is the runtime's ID of an API container ID
// (podmodel.RuntimeContainerID).
func runtimeID(id string) string {
	rid, _ := podmodel.RuntimeContainerID(id)
	return rid
}
