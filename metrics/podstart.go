package metrics

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podStarts tracks the pods that have not started yet, for
// kubelet_pod_start_duration_seconds and
// kubelet_pod_start_sli_duration_seconds.
type podStarts struct {
	mu   sync.Mutex
	pods map[types.UID]*podStart
	// networkSeen: a pod with its own network started already (the
	// first_with_network label).
	networkSeen bool
}

type podStart struct {
	firstSeen          time.Time
	firstPull, lastEnd time.Time
	running, started   bool
}

func (s *podStarts) init() { s.pods = map[types.UID]*podStart{} }

// forgetLocked drops the pod; the map is made anew once empty: a map keeps
// the room it grew to as it empties, and a churn grows it to every pod on
// the node at once.
func (s *podStarts) forgetLocked(uid types.UID) {
	delete(s.pods, uid)
	if len(s.pods) == 0 {
		s.init()
	}
}

func (s *podStarts) get(uid types.UID) *podStart {
	p := s.pods[uid]
	if p == nil {
		p = &podStart{}
		s.pods[uid] = p
	}
	return p
}

func (s *podStarts) pullStarted(uid string, now time.Time) {
	if uid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.get(types.UID(uid)); p.firstPull.IsZero() && !p.started {
		p.firstPull = now
	}
}

func (s *podStarts) pullFinished(uid string, now time.Time) {
	if uid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.get(types.UID(uid)); !p.started {
		p.lastEnd = now
	}
}

// ObservePodStatus follows the pods' statuses (a status.Observer) for the
// pod start metrics. The first status of a pod is when the agent first saw
// it. kubelet_pod_start_duration_seconds is observed when the pod's phase
// first becomes Running, from then; kubelet_pod_start_sli_duration_seconds
// when all its containers are first running and started, from the pod's
// creation timestamp, less the time from its first image pull's start to
// its last one's end. A pod is forgotten when its phase becomes terminal
// or ForgetPod is called.
func (k *Kubelet) ObservePodStatus(pod *v1.Pod, status v1.PodStatus) {
	k.observePodStatus(pod, status, time.Now())
}

func (k *Kubelet) observePodStatus(pod *v1.Pod, status v1.PodStatus, now time.Time) {
	s := &k.starts
	s.mu.Lock()
	defer s.mu.Unlock()
	if status.Phase == v1.PodSucceeded || status.Phase == v1.PodFailed {
		s.forgetLocked(pod.UID)
		return
	}
	p := s.get(pod.UID)
	if p.firstSeen.IsZero() {
		p.firstSeen = now
	}
	if !p.running && status.Phase == v1.PodRunning {
		p.running = true
		k.podStartDuration.Observe(now.Sub(p.firstSeen).Seconds())
	}
	if p.started || !allStarted(pod, status) {
		return
	}
	p.started = true
	if pod.CreationTimestamp.IsZero() {
		return
	}
	d := now.Sub(pod.CreationTimestamp.Time)
	if !p.firstPull.IsZero() && p.lastEnd.After(p.firstPull) {
		d -= p.lastEnd.Sub(p.firstPull)
	}
	first := "false"
	if !pod.Spec.HostNetwork && !s.networkSeen {
		s.networkSeen = true
		first = "true"
	}
	k.podStartSLI.WithLabelValues(first).Observe(max(d, 0).Seconds())
}

// ForgetPod drops what the pod start metrics keep of a pod (removed from
// the node).
func (k *Kubelet) ForgetPod(uid types.UID) {
	k.starts.mu.Lock()
	defer k.starts.mu.Unlock()
	k.starts.forgetLocked(uid)
}

// allStarted reports whether every regular container of pod is running
// and started in status.
func allStarted(pod *v1.Pod, status v1.PodStatus) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	for _, c := range pod.Spec.Containers {
		ok := false
		for _, cs := range status.ContainerStatuses {
			if cs.Name == c.Name {
				ok = cs.State.Running != nil && cs.Started != nil && *cs.Started
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
