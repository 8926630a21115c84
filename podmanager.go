package nodekit

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podManager holds the pods the agent should run, by UID and by full name.
// It is safe for concurrent use: the sync loop writes, pod workers and
// callers of Agent read.
type podManager struct {
	mu     sync.RWMutex
	byUID  map[types.UID]*v1.Pod
	byName map[string]*v1.Pod
}

func newPodManager() *podManager {
	return &podManager{byUID: make(map[types.UID]*v1.Pod), byName: make(map[string]*v1.Pod)}
}

func fullName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// addOrUpdate records pod, replacing the pod with the same UID.
func (m *podManager) addOrUpdate(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byUID[pod.UID] = pod
	m.byName[fullName(pod)] = pod
}

func (m *podManager) remove(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byUID, pod.UID)
	// Another UID may hold the name already (a static pod replaced by its
	// edited manifest).
	if p, ok := m.byName[fullName(pod)]; ok && p.UID == pod.UID {
		delete(m.byName, fullName(pod))
	}
}

// GetPodByUID implements syncloop.PodGetter.
func (m *podManager) GetPodByUID(uid types.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byUID[uid]
	return p, ok
}

func (m *podManager) getPodByFullName(name string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.byName[name]
	return p, ok
}

func (m *podManager) pods() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	pods := make([]*v1.Pod, 0, len(m.byUID))
	for _, p := range m.byUID {
		pods = append(pods, p)
	}
	return pods
}
