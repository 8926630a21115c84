package podsync

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
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
// DeadlineExceeded, with a Normal event of that reason, and sets
// *exceeded; SyncPod then stops its containers at once and reports it
// terminal. A pod not yet there is queued to wake at its deadline (the
// queue's Wake, when it has one: the sync loop takes it then rather than
// at its next tick). nil for a pod without a deadline.
func (s *Syncer) activeDeadline(pod *v1.Pod, exceeded *bool) func(*v1.PodStatus) {
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
			if w, ok := s.c.Queue.(wakeQueue); ok {
				w.Wake(pod.UID, left)
			} else {
				s.c.Queue.Enqueue(pod.UID, left)
			}
			return
		}
		*exceeded = true
		st.Phase, st.Reason, st.Message = v1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
		s.c.Events.Event(runtime.PodReference(pod, ""), v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	}
}

// wakeQueue is the optional capability of a Queue that wakes the sync loop
// when a pod is due (podworker.Queue has it).
type wakeQueue interface {
	Wake(uid types.UID, delay time.Duration)
}

// killAtDeadline stops the containers of a pod its active deadline just
// failed, in the sync that found it, with the pod's grace period, as its
// worker's termination would a moment later (which then finds them
// stopped): the containers stop within the sync loop's reaction to the
// deadline rather than after the next status refresh. A failure is
// logged; the termination tries again.
func (s *Syncer) killAtDeadline(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) {
	if podStatus == nil {
		return
	}
	rp := runtime.RunningPod(podStatus)
	s.c.Probes.StopLivenessAndStartup(pod)
	grace := deadlineGracePeriod(pod)
	if err := s.c.Runtime.KillPod(ctx, pod, rp, &grace); err != nil && ctx.Err() == nil {
		s.c.Logger.Error(err, "Stopping the containers of a pod past its active deadline", "pod", podmodel.FullName(pod), "podUID", pod.UID)
	}
}

// deadlineGracePeriod is the grace period of a pod stopped at its
// deadline: its deletion's when it is being deleted, else its spec's, at
// least 1 s, as the pod workers compute it.
func deadlineGracePeriod(pod *v1.Pod) int64 {
	var grace int64 = 30
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(grace, 1)
}
