package nodekit

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
)

// podManager holds the pods the agent should run, by UID and by full name.
// It is safe for concurrent use: the sync loop writes, pod workers and
// callers of Agent read.
type podManager struct {
	mu     sync.RWMutex
	byUID  map[types.UID]*v1.Pod
	byName map[string]*v1.Pod
	// mirrors are the API server's mirror pods of static pods, by full
	// name: never run, only reported to.
	mirrors map[string]*v1.Pod
}

func newPodManager() *podManager {
	return &podManager{byUID: make(map[types.UID]*v1.Pod), byName: make(map[string]*v1.Pod), mirrors: make(map[string]*v1.Pod)}
}

// splitMirrors records the mirror pods among pods (or forgets them, when
// remove) and returns the others.
func (m *podManager) splitMirrors(pods []*v1.Pod, remove bool) []*v1.Pod {
	out := pods[:0:0]
	for _, p := range pods {
		if !podmodel.IsMirror(p) {
			out = append(out, p)
			continue
		}
		m.mu.Lock()
		if remove {
			if cur, ok := m.mirrors[podmodel.FullName(p)]; ok && cur.UID == p.UID {
				delete(m.mirrors, podmodel.FullName(p))
			}
		} else {
			m.mirrors[podmodel.FullName(p)] = p
		}
		m.mu.Unlock()
	}
	return out
}

// GetPodByUID implements syncloop.PodGetter.

// addOrUpdate records pod, replacing the pod with the same UID.
func (m *podManager) addOrUpdate(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byUID[pod.UID] = pod
	m.byName[podmodel.FullName(pod)] = pod
}

func (m *podManager) remove(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byUID, pod.UID)
	// Another UID may hold the name already (a static pod replaced by its
	// edited manifest).
	if p, ok := m.byName[podmodel.FullName(pod)]; ok && p.UID == pod.UID {
		delete(m.byName, podmodel.FullName(pod))
	}
}

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
