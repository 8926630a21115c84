// Package podmanager holds the pods an agent should run: the desired
// state the sync loop's handler records from the pod sources, by UID and
// by full name, with the API server's mirror pods of static pods kept
// apart (they are reported to, never run).
//
// The default handler (package synchandler) writes it; the sync loop, the
// pod workers and the agent's readers look pods up in it. Counts of its
// changes (Generation) let housekeeping and admission tell when what they
// computed from the pods still holds.
//
// # Concurrency
//
// A Manager is safe for concurrent use and lives as long as its agent.
package podmanager

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
)

// Manager holds the pods the agent should run, by UID and by full name,
// and the API server's mirror pods apart. It is safe for concurrent use:
// the sync loop writes, pod workers and callers of Agent read.
type Manager struct {
	mu     sync.RWMutex
	byUID  map[types.UID]*v1.Pod
	byName map[string]*v1.Pod
	// mirrors are the API server's mirror pods of static pods, by full
	// name: never run, only reported to.
	mirrors map[string]*v1.Pod
	// changes counts the changes of the pods and mirror pods held, and
	// removals the pods removed, so that housekeeping and admission
	// can tell when what they computed from the pods still holds.
	changes, removals uint64
}

// New returns an empty Manager.
func New() *Manager {
	return &Manager{byUID: make(map[types.UID]*v1.Pod), byName: make(map[string]*v1.Pod), mirrors: make(map[string]*v1.Pod)}
}

// SplitMirrors records the mirror pods among pods (or forgets them, when
// remove) and returns the others: the pods to run.
func (m *Manager) SplitMirrors(pods []*v1.Pod, remove bool) []*v1.Pod {
	out := pods[:0:0]
	for _, p := range pods {
		if !podmodel.IsMirror(p) {
			out = append(out, p)
			continue
		}
		m.mu.Lock()
		m.changes++
		if remove {
			if cur, ok := m.mirrors[podmodel.FullName(p)]; ok && cur.UID == p.UID {
				delete(m.mirrors, podmodel.FullName(p))
				m.shrinkLocked()
			}
		} else {
			m.mirrors[podmodel.FullName(p)] = p
		}
		m.mu.Unlock()
	}
	return out
}

// AddOrUpdate records pod, replacing the pod with the same UID.
func (m *Manager) AddOrUpdate(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changes++
	m.byUID[pod.UID] = pod
	m.byName[podmodel.FullName(pod)] = pod
}

// Remove forgets pod.
func (m *Manager) Remove(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changes++
	m.removals++
	delete(m.byUID, pod.UID)
	// Another UID may hold the name already (a static pod replaced by its
	// edited manifest).
	if p, ok := m.byName[podmodel.FullName(pod)]; ok && p.UID == pod.UID {
		delete(m.byName, podmodel.FullName(pod))
	}
	m.shrinkLocked()
}

// shrinkLocked makes the maps anew once they are empty: a map gives back
// none of the room it grew to as it empties, and a churn of pods grows
// them to every pod wanted at once.
func (m *Manager) shrinkLocked() {
	if len(m.byUID) == 0 {
		m.byUID = make(map[types.UID]*v1.Pod)
	}
	if len(m.byName) == 0 {
		m.byName = make(map[string]*v1.Pod)
	}
	if len(m.mirrors) == 0 {
		m.mirrors = make(map[string]*v1.Pod)
	}
}

// GetPodByUID returns the pod with this UID; it implements
// syncloop.PodGetter.
func (m *Manager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byUID[uid]
	return p, ok
}

// Pods returns the pods to run, in no particular order. They must not be
// modified.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	pods := make([]*v1.Pod, 0, len(m.byUID))
	for _, p := range m.byUID {
		pods = append(pods, p)
	}
	return pods
}

// Generation returns the count of changes to the pods held (additions,
// updates, removals, mirror pods) and of removals alone.
func (m *Manager) Generation() (changes, removals uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changes, m.removals
}
