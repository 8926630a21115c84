package podsync

import (
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

type deadlineStatuses struct{ start *metav1.Time }

func (d deadlineStatuses) SetPodStatus(*v1.Pod, v1.PodStatus) bool { return true }
func (d deadlineStatuses) GetPodStatus(types.UID) (v1.PodStatus, bool) {
	return v1.PodStatus{StartTime: d.start}, d.start != nil
}

type deadlineQueue struct {
	mu    sync.Mutex
	delay map[types.UID]time.Duration
}

func (q *deadlineQueue) Enqueue(uid types.UID, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.delay[uid] = d
}

type reasons struct{ got []string }

func (r *reasons) Event(_ apiruntime.Object, typ, reason, message string) {
	r.got = append(r.got, typ+" "+reason+" "+message)
}

func TestActiveDeadline(t *testing.T) {
	ago := func(d time.Duration) *metav1.Time { t := metav1.NewTime(time.Now().Add(-d)); return &t }
	seconds := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name      string
		deadline  *int64
		managed   *metav1.Time // the status manager's start time
		podStart  *metav1.Time // the pod's own status
		wantPhase v1.PodPhase
		wantQueue bool
	}{
		{name: "no deadline"},
		{name: "not started", deadline: seconds(5)},
		{name: "past the deadline", deadline: seconds(5), managed: ago(10 * time.Second), wantPhase: v1.PodFailed},
		{name: "exactly at the deadline", deadline: seconds(5), managed: ago(5 * time.Second), wantPhase: v1.PodFailed},
		{name: "before the deadline: queued for it", deadline: seconds(60), managed: ago(time.Second), wantQueue: true},
		{name: "the pod's own start time when the manager has none", deadline: seconds(5), podStart: ago(6 * time.Second), wantPhase: v1.PodFailed},
		{name: "the manager's start time wins", deadline: seconds(5), managed: ago(time.Second), podStart: ago(time.Hour), wantQueue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &deadlineQueue{delay: map[types.UID]time.Duration{}}
			ev := &reasons{}
			s := &Syncer{c: Config{Statuses: deadlineStatuses{start: tc.managed}, Queue: q, Events: ev}}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{ActiveDeadlineSeconds: tc.deadline}}
			pod.Status.StartTime = tc.podStart
			var exceeded bool
			edit := s.activeDeadline(pod, &exceeded)
			if tc.deadline == nil {
				if edit != nil {
					t.Error("an edit for a pod without a deadline")
				}
				return
			}
			st := v1.PodStatus{Phase: v1.PodRunning}
			edit(&st)
			if tc.wantPhase == v1.PodFailed {
				if st.Phase != v1.PodFailed || st.Reason != "DeadlineExceeded" || st.Message != "Pod was active on the node longer than the specified deadline" {
					t.Errorf("status = %s %q %q, want Failed DeadlineExceeded", st.Phase, st.Reason, st.Message)
				}
				if !exceeded {
					t.Error("the deadline passed, but the edit did not say so")
				}
				if len(ev.got) != 1 || ev.got[0] != "Normal DeadlineExceeded Pod was active on the node longer than the specified deadline" {
					t.Errorf("events = %q", ev.got)
				}
				return
			}
			if st.Phase != v1.PodRunning || len(ev.got) != 0 {
				t.Errorf("status %s, events %q; want the pod untouched", st.Phase, ev.got)
			}
			d, queued := q.delay["u1"]
			if queued != tc.wantQueue {
				t.Fatalf("queued = %t, want %t", queued, tc.wantQueue)
			}
			if queued && (d <= 0 || d > time.Duration(*tc.deadline)*time.Second) {
				t.Errorf("queued in %s, want within the deadline", d)
			}
		})
	}
}
