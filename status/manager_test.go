package status

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSetPodStatusMerge(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	ready := func(s v1.ConditionStatus, at metav1.Time) []v1.PodCondition {
		return []v1.PodCondition{{Type: v1.PodReady, Status: s, LastTransitionTime: at}}
	}
	tests := []struct {
		name      string
		old, set  *v1.PodStatus
		want      v1.PodStatus
		wantCalls int
	}{{
		name: "first status", set: &v1.PodStatus{Phase: v1.PodPending},
		want: v1.PodStatus{Phase: v1.PodPending}, wantCalls: 1,
	}, {
		name: "unchanged is not reported",
		old:  &v1.PodStatus{Phase: v1.PodRunning}, set: &v1.PodStatus{Phase: v1.PodRunning},
		want: v1.PodStatus{Phase: v1.PodRunning}, wantCalls: 1,
	}, {
		name: "terminal phase is final",
		old:  &v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfpods"}, set: &v1.PodStatus{Phase: v1.PodRunning},
		want: v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfpods"}, wantCalls: 1,
	}, {
		name: "start time kept",
		old:  &v1.PodStatus{Phase: v1.PodPending, StartTime: &t0}, set: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &t1},
		want: v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0}, wantCalls: 2,
	}, {
		name: "transition time of an unchanged condition kept",
		old:  &v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue, t0)},
		set:  &v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue, t1)},
		want: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue, t0)}, wantCalls: 1,
	}, {
		name: "transition time of a changed condition taken",
		old:  &v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue, t0)},
		set:  &v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionFalse, t1)},
		want: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionFalse, t1)}, wantCalls: 2,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			var seen v1.PodStatus
			m := NewManager(Options{Observer: func(_ *v1.Pod, s v1.PodStatus) { calls++; seen = s }})
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
			if tt.old != nil {
				m.SetPodStatus(pod, *tt.old)
			}
			m.SetPodStatus(pod, *tt.set)
			got, ok := m.GetPodStatus("u")
			if !ok {
				t.Fatal("GetPodStatus: not found")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, seen); diff != "" {
				t.Errorf("observed status (-want +got):\n%s", diff)
			}
			if calls != tt.wantCalls {
				t.Errorf("observer called %d times, want %d", calls, tt.wantCalls)
			}
		})
	}
}

func TestRemoveOrphans(t *testing.T) {
	m := NewManager(Options{})
	for _, uid := range []string{"a", "b"} {
		m.SetPodStatus(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "x"}}, v1.PodStatus{})
		m.SetPodStatus(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}, v1.PodStatus{Phase: v1.PodRunning})
	}
	m.RemoveOrphans(map[types.UID]bool{"a": true})
	if _, ok := m.GetPodStatus("a"); !ok {
		t.Error("a removed, want kept")
	}
	for _, uid := range []types.UID{"b", "x"} {
		if _, ok := m.GetPodStatus(uid); ok {
			t.Errorf("%s kept, want removed", uid)
		}
	}
}

// TestRemoveOrphansOnForget checks that OnForget is told of each pod
// RemoveOrphans forgot, once, outside the Manager's lock (it may call the
// Manager back), so that what others keep of the pod goes with it.
func TestRemoveOrphansOnForget(t *testing.T) {
	var m *Manager
	var forgot []types.UID
	m = NewManager(Options{OnForget: func(uid types.UID) {
		m.GetPodStatus(uid) // deadlocks under the lock
		forgot = append(forgot, uid)
	}})
	for _, uid := range []types.UID{"a", "b", "c"} {
		m.SetPodStatus(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}, v1.PodStatus{Phase: v1.PodRunning})
	}
	m.RemoveOrphans(map[types.UID]bool{"a": true})
	slices.Sort(forgot)
	if want := []types.UID{"b", "c"}; !slices.Equal(forgot, want) {
		t.Errorf("OnForget told of %v, want %v", forgot, want)
	}
	forgot = nil
	m.RemoveOrphans(map[types.UID]bool{"a": true})
	if len(forgot) != 0 {
		t.Errorf("a second pass told OnForget of %v, want none", forgot)
	}
}

// TestSameStatus: statuses that encode alike are the same; those that do
// not are compared semantically (a quantity spelt two ways is the same).
func TestSameStatus(t *testing.T) {
	now := metav1.Now()
	base := func() v1.PodStatus {
		return v1.PodStatus{
			Phase: v1.PodRunning, StartTime: &now,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true,
				AllocatedResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}}},
		}
	}
	tests := []struct {
		name string
		edit func(*v1.PodStatus)
		want bool
	}{
		{"same", func(*v1.PodStatus) {}, true},
		{"nil and empty slices", func(s *v1.PodStatus) { s.PodIPs = []v1.PodIP{} }, true},
		{"quantity spelt otherwise", func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU] = resource.MustParse("1000m")
		}, true},
		{"phase", func(s *v1.PodStatus) { s.Phase = v1.PodFailed }, false},
		{"condition", func(s *v1.PodStatus) { s.Conditions[0].Status = v1.ConditionFalse }, false},
		{"readiness", func(s *v1.PodStatus) { s.ContainerStatuses[0].Ready = false }, false},
		{"start time", func(s *v1.PodStatus) { s.StartTime = nil }, false},
		{"started unset and false", func(s *v1.PodStatus) { f := false; s.ContainerStatuses[0].Started = &f }, false},
		{"nil and empty conditions", func(s *v1.PodStatus) { s.Conditions = nil }, false},
		{"pod IP", func(s *v1.PodStatus) { s.PodIP = "10.0.0.1" }, false},
		{"reason", func(s *v1.PodStatus) { s.Reason = "Evicted" }, false},
		{"condition reason", func(s *v1.PodStatus) { s.Conditions[0].Reason = "PodCompleted" }, false},
		{"condition time", func(s *v1.PodStatus) { s.Conditions[0].LastTransitionTime = metav1.Time{} }, false},
		{"one container more", func(s *v1.PodStatus) {
			s.ContainerStatuses = append(s.ContainerStatuses, v1.ContainerStatus{Name: "side"})
		}, false},
		{"restart count", func(s *v1.PodStatus) { s.ContainerStatuses[0].RestartCount = 1 }, false},
		{"observed generation", func(s *v1.PodStatus) { s.ObservedGeneration = 2 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.edit(&b)
			if got := sameStatus(&a, &b); got != tc.want {
				t.Errorf("sameStatus = %v, want %v", got, tc.want)
			}
			// The quick look says they differ only when they do.
			if plainlyDiffer(&a, &b) && apiequality.Semantic.DeepEqual(a, b) {
				t.Error("plainlyDiffer on semantically equal statuses")
			}
		})
	}
}

// TestSameStatusEmptyConditions: no conditions, nil or empty, are the
// same.
func TestSameStatusEmptyConditions(t *testing.T) {
	a := v1.PodStatus{Phase: v1.PodPending}
	b := v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{}, ContainerStatuses: []v1.ContainerStatus{}}
	if plainlyDiffer(&a, &b) || !sameStatus(&a, &b) {
		t.Error("nil and empty lists differ")
	}
}

// TestSetPodStatusCopies: the status held is the manager's own (the
// caller's status, changed afterwards, leaves it as it was, and the
// manager's merge leaves the caller's as it was), and pods with equal
// conditions share one list of them.
func TestSetPodStatusCopies(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	long := strings.Repeat("x", MaxPodTerminationMessageLength+1)
	in := func() v1.PodStatus {
		start := t0
		return v1.PodStatus{
			Phase: v1.PodRunning, StartTime: &start, PodIPs: []v1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue}, // merge sets its time
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, LastTerminationState: v1.ContainerState{
				Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Message: long}}}},
		}
	}
	m := NewManager(Options{})
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{UID: "a"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}},
		{ObjectMeta: metav1.ObjectMeta{UID: "b"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}},
	}
	given := in()
	m.SetPodStatus(pods[0], given)
	if diff := cmp.Diff(in(), given); diff != "" {
		t.Errorf("SetPodStatus changed the caller's status (-want +got):\n%s", diff)
	}
	a, _ := m.GetPodStatus("a")
	if got := len(a.ContainerStatuses[0].LastTerminationState.Terminated.Message); got != MaxPodTerminationMessageLength {
		t.Errorf("message held is %d bytes, want %d", got, MaxPodTerminationMessageLength)
	}
	if a.Conditions[1].LastTransitionTime.IsZero() {
		t.Error("condition held without a transition time")
	}
	given.PodIPs[0].IP = "changed"
	given.StartTime.Time = t0.Add(time.Hour)
	given.Conditions[0].Status = v1.ConditionFalse
	given.ContainerStatuses[0].Ready = false
	if a2, _ := m.GetPodStatus("a"); !cmp.Equal(a, a2) || a2.PodIPs[0].IP != "10.0.0.1" || a2.StartTime.Time != t0.Time ||
		a2.Conditions[0].Status != v1.ConditionTrue || !a2.ContainerStatuses[0].Ready {
		t.Errorf("the status held follows the caller's: %+v", a2)
	}

	// The same conditions for another pod: one list held for both. The
	// merge gives the condition without a time the current second: set it
	// as a's has it.
	b := in()
	b.Conditions[1].LastTransitionTime = a.Conditions[1].LastTransitionTime
	m.SetPodStatus(pods[1], b)
	got, _ := m.GetPodStatus("b")
	if diff := cmp.Diff(a.Conditions, got.Conditions); diff != "" {
		t.Fatalf("b's conditions (-a +b):\n%s", diff)
	}
	if &got.Conditions[0] != &a.Conditions[0] {
		t.Error("equal conditions held twice, want one list shared")
	}
	if cap(got.Conditions) != len(got.Conditions) {
		t.Errorf("shared list has room to append (%d of %d): an append would write into it", len(got.Conditions), cap(got.Conditions))
	}
	// A change of b's conditions leaves a's.
	b.Conditions[0].Status = v1.ConditionFalse
	m.SetPodStatus(pods[1], b)
	got, _ = m.GetPodStatus("b")
	if a2, _ := m.GetPodStatus("a"); got.Conditions[0].Status != v1.ConditionFalse || a2.Conditions[0].Status != v1.ConditionTrue {
		t.Errorf("after b's change: b %s, a %s; want False, True", got.Conditions[0].Status, a2.Conditions[0].Status)
	}
}

// BenchmarkSetPodStatus sets the status of a running pod, unchanged, as a
// resync does.
func BenchmarkSetPodStatus(b *testing.B) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	conds := make([]v1.PodCondition, 0, 5)
	for _, c := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		conds = append(conds, v1.PodCondition{Type: c, Status: v1.ConditionTrue, LastTransitionTime: t0})
	}
	st := v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0, Conditions: conds, PodIPs: []v1.PodIP{{IP: "10.0.0.1"}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, Image: "busybox:1.36",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t0}}}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	m := NewManager(Options{})
	m.SetPodStatus(pod, st)
	b.ReportAllocs()
	for b.Loop() {
		m.SetPodStatus(pod, st)
	}
}

// BenchmarkSetPodStatusStart sets the statuses of a pod's start: Pending
// with its container waiting, then Running, as a start's sync does.
func BenchmarkSetPodStatusStart(b *testing.B) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	conditions := func(status v1.ConditionStatus) []v1.PodCondition {
		conds := make([]v1.PodCondition, 0, 5)
		for _, c := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
			conds = append(conds, v1.PodCondition{Type: c, Status: status})
		}
		return conds
	}
	pending := v1.PodStatus{Phase: v1.PodPending, StartTime: &t0, Conditions: conditions(v1.ConditionFalse),
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Image: "busybox:1.36",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	running := v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0, Conditions: conditions(v1.ConditionTrue), PodIPs: []v1.PodIP{{IP: "10.0.0.1"}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, Image: "busybox:1.36",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t0}}}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
	m := NewManager(Options{})
	m.SetPodStatus(pod, running)
	b.ReportAllocs()
	for b.Loop() {
		m.SetPodStatus(pod, pending)
		m.SetPodStatus(pod, running)
	}
}
