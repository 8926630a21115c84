package podsync

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's reason and message of a pod past its activeDeadlineSeconds.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline is the kubelet's active-deadline handler as a status
// edit: a pod whose activeDeadlineSeconds have passed since it started
// (its start time as the status manager holds it) fails with reason
// DeadlineExceeded, with a Normal event of that reason, and SyncPod then
// reports it terminal so its worker kills its containers. A pod not yet
// there is queued to sync when its deadline passes. nil for a pod without
// a deadline.
func (s *Syncer) activeDeadline(pod *v1.Pod) func(*v1.PodStatus) {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return nil
	}
	return func(st *v1.PodStatus) {
		start := pod.Status.StartTime
		if prev, ok := s.c.Statuses.GetPodStatus(pod.UID); ok && prev.StartTime != nil {
			start = prev.StartTime
		}
		if start == nil {
			start = st.StartTime
		}
		if start == nil || start.IsZero() {
			return
		}
		left := time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second - time.Since(start.Time)
		if left > 0 {
			s.c.Queue.Enqueue(pod.UID, left)
			return
		}
		st.Phase, st.Reason, st.Message = v1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
		s.c.Events.Event(runtime.PodReference(pod, ""), v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	}
}
