package status

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Observer is told of every change of a pod's status. It must not block.
type Observer func(pod *v1.Pod, status v1.PodStatus)

// Options for NewManager.
type Options struct {
	// Observer, when set, is called after each change.
	Observer Observer
}

// Manager holds the statuses. The zero value is not usable; call
// NewManager.
type Manager struct {
	opts Options

	mu       sync.Mutex
	statuses map[types.UID]versioned
	// notify serialises observer calls so that they arrive in order.
	notify sync.Mutex
}

type versioned struct {
	status  v1.PodStatus
	version uint64
}

// NewManager returns an empty Manager.
func NewManager(opts Options) *Manager {
	return &Manager{opts: opts, statuses: make(map[types.UID]versioned)}
}

// GetPodStatus returns the pod's current status.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.statuses[uid]
	return s.status, ok
}

// SetPodStatus records status for pod, merged with the one held: the start
// time is kept once set, a terminal phase (Succeeded, Failed) is never left,
// and the transition times of unchanged conditions are kept. It reports
// whether anything changed.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) bool {
	m.mu.Lock()
	old, ok := m.statuses[pod.UID]
	status = merge(old.status, ok, status)
	if ok && apiequality.Semantic.DeepEqual(old.status, status) {
		m.mu.Unlock()
		return false
	}
	m.statuses[pod.UID] = versioned{status: status, version: old.version + 1}
	// Take the notify lock before releasing mu so that observers see the
	// changes of a pod in the order they were made.
	m.notify.Lock()
	m.mu.Unlock()
	defer m.notify.Unlock()
	if m.opts.Observer != nil {
		m.opts.Observer(pod, status)
	}
	return true
}

// Version returns the number of changes recorded for the pod.
func (m *Manager) Version(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statuses[uid].version
}

// DeletePodStatus forgets the pod.
func (m *Manager) DeletePodStatus(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.statuses, uid)
}

// RemoveOrphans forgets every pod not in keep.
func (m *Manager) RemoveOrphans(keep map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.statuses {
		if !keep[uid] {
			delete(m.statuses, uid)
		}
	}
}

// IsTerminal reports whether the phase is Succeeded or Failed.
func IsTerminal(phase v1.PodPhase) bool {
	return phase == v1.PodSucceeded || phase == v1.PodFailed
}

func merge(old v1.PodStatus, hadOld bool, status v1.PodStatus) v1.PodStatus {
	if !hadOld {
		return status
	}
	if IsTerminal(old.Phase) {
		status.Phase = old.Phase
		if status.Reason == "" {
			status.Reason, status.Message = old.Reason, old.Message
		}
	}
	if old.StartTime != nil {
		status.StartTime = old.StartTime
	}
	// Keep the transition time of conditions whose status did not change.
	for i := range status.Conditions {
		c := &status.Conditions[i]
		for _, o := range old.Conditions {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	return status
}
