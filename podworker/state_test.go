package podworker

import (
	"errors"
	"github.com/nodekit/nodekit/podmodel"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/sources"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// newPod is a pod of UID uid, name uid, namespace ns, resourceVersion
// "1", spec grace 30.
func newPod(uid string, edits ...func(*v1.Pod)) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns", ResourceVersion: "1"},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: ptr[int64](30)},
	}
	for _, e := range edits {
		e(pod)
	}
	return pod
}

func version(v string) func(*v1.Pod) { return func(p *v1.Pod) { p.ResourceVersion = v } }
func static(p *v1.Pod) {
	p.Annotations = map[string]string{sources.AnnotationSource: sources.FileSource}
}
func phase(ph v1.PodPhase) func(*v1.Pod) { return func(p *v1.Pod) { p.Status.Phase = ph } }
func deleted(grace int64) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: t0}
		p.DeletionGracePeriodSeconds = ptr(grace)
	}
}

func create(pod *v1.Pod) UpdateOptions { return UpdateOptions{UpdateType: SyncPodCreate, Pod: pod} }
func upd(pod *v1.Pod) UpdateOptions    { return UpdateOptions{UpdateType: SyncPodUpdate, Pod: pod} }
func kill(pod *v1.Pod, k *KillPodOptions) UpdateOptions {
	return UpdateOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: k}
}
func runtimeKill(uid string) UpdateOptions {
	return UpdateOptions{UpdateType: SyncPodKill, RunningPod: &runtime.Pod{ID: types.UID(uid), Name: uid, Namespace: "ns"}}
}

// view is the part of a podState the tests compare.
type view struct {
	Phase              PodWorkerState
	Started            bool
	StartedTerminating bool
	Finished           bool
	Grace              int64
	Deleted            bool
	Evicted            bool
	ObservedRuntime    bool
	RestartRequested   bool
	Pending            string
	Active             string
	Kills              int
}

func describe(u *UpdateOptions) string {
	switch {
	case u == nil:
		return ""
	case u.Pod != nil:
		return u.UpdateType.String() + " " + u.Pod.Name + "@" + u.Pod.ResourceVersion
	case u.RunningPod != nil:
		return u.UpdateType.String() + " runtime " + u.RunningPod.Name
	}
	return u.UpdateType.String()
}

func viewOf(s *podState) view {
	return view{
		Phase:              s.phase(),
		Started:            s.started,
		StartedTerminating: s.startedTerminating,
		Finished:           s.finished,
		Grace:              s.gracePeriod,
		Deleted:            s.deleted,
		Evicted:            s.evicted,
		ObservedRuntime:    s.observedRuntime,
		RestartRequested:   s.restartRequested,
		Pending:            describe(s.pending),
		Active:             describe(s.active),
		Kills:              len(s.kills),
	}
}

// fresh is a pod the worker has not seen.
func fresh(pod *v1.Pod) *podState {
	return newPodState(pod.UID, create(pod), false, t0)
}

// syncing is a pod whose first SyncPod succeeded.
func syncing(pod *v1.Pod) *podState {
	s := fresh(pod)
	s.update(create(pod), true, t0)
	w, _ := s.take(true, t0)
	s.complete(w, result{}, t0)
	return s
}

// terminating is a pod whose SyncTerminatingPod, with grace, is in flight.
func terminating(pod *v1.Pod, grace int64) *podState {
	s := syncing(pod)
	s.update(kill(pod, &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr(grace)}), false, t0)
	s.take(true, t0)
	return s
}

// terminated is a pod whose SyncTerminatedPod is in flight.
func terminated(pod *v1.Pod) *podState {
	s := terminating(pod, 30)
	s.complete(work{kind: workTerminating}, result{}, t0)
	s.take(true, t0)
	return s
}

// finished is a pod whose worker finished.
func finished(pod *v1.Pod) *podState {
	s := terminated(pod)
	s.complete(work{kind: workTerminated}, result{}, t0)
	return s
}

func TestEffectiveGracePeriod(t *testing.T) {
	specOnly := newPod("a")
	tests := []struct {
		name          string
		current       int64
		pod           *v1.Pod
		kill          *KillPodOptions
		wantGrace     int64
		wantShortened bool
	}{
		{name: "spec", pod: specOnly, wantGrace: 30},
		{name: "no spec: minimum", pod: newPod("a", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }), wantGrace: 1},
		{name: "runtime pod: minimum", wantGrace: 1},
		{name: "deletion grace replaces spec", pod: newPod("a", deleted(10)), wantGrace: 10},
		{name: "deletion grace 0: minimum 1", pod: newPod("a", deleted(0)), wantGrace: 1},
		{name: "override replaces spec", pod: specOnly, kill: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](5)}, wantGrace: 5},
		{name: "shorter of deletion and override", pod: newPod("a", deleted(10)), kill: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](20)}, wantGrace: 10},
		{name: "override after deletion grace 0 cannot grow it", pod: newPod("a", deleted(0)), kill: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](20)}, wantGrace: 1},
		{name: "in force: spec does not apply", current: 20, pod: specOnly, wantGrace: 20},
		{name: "in force: shorter override shrinks", current: 20, pod: specOnly, kill: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](3)}, wantGrace: 3, wantShortened: true},
		{name: "in force: longer override ignored", current: 20, pod: specOnly, kill: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](60)}, wantGrace: 20},
		{name: "in force: longer deletion grace ignored", current: 20, pod: newPod("a", deleted(60)), wantGrace: 20},
		{name: "in force: shorter deletion grace shrinks", current: 20, pod: newPod("a", deleted(2)), wantGrace: 2, wantShortened: true},
		{name: "in force: minimum never shrinks", current: 1, pod: newPod("a", deleted(0)), wantGrace: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			grace, shortened := effectiveGracePeriod(tt.current, tt.pod, tt.kill)
			if diff := cmp.Diff([2]any{tt.wantGrace, tt.wantShortened}, [2]any{grace, shortened}); diff != "" {
				t.Errorf("effectiveGracePeriod (grace, shortened) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	pod := newPod("a")
	tests := []struct {
		name       string
		in         UpdateOptions
		wantUID    types.UID
		wantReason bool
		wantOpts   string
	}{
		{name: "pod", in: upd(pod), wantUID: "a", wantOpts: "update a@1"},
		{name: "pod and running pod: running pod dropped", in: UpdateOptions{UpdateType: SyncPodKill, Pod: pod, RunningPod: &runtime.Pod{ID: "a"}}, wantUID: "a", wantOpts: "kill a@1"},
		{name: "running pod kill", in: runtimeKill("r"), wantUID: "r", wantOpts: "kill runtime r"},
		{name: "running pod sync refused", in: UpdateOptions{UpdateType: SyncPodSync, RunningPod: &runtime.Pod{ID: "r"}}, wantUID: "r", wantReason: true, wantOpts: "sync runtime "},
		{name: "nothing", in: UpdateOptions{}, wantReason: true, wantOpts: "sync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, uid, reason := normalize(tt.in)
			got := []any{uid, reason != "", describe(&opts)}
			if diff := cmp.Diff([]any{tt.wantUID, tt.wantReason, tt.wantOpts}, got); diff != "" {
				t.Errorf("normalize (uid, refused, opts) (-want +got):\n%s", diff)
			}
		})
	}
}

// updateView is the part of an updateResult the tests compare.
type updateView struct {
	Ignored   bool
	Wake      bool
	Cancel    bool
	Completed int
}

func TestUpdate(t *testing.T) {
	pod := newPod("a")
	v2 := newPod("a", version("2"))
	done := func() *KillPodOptions { return &KillPodOptions{CompletedCh: make(chan struct{})} }
	shorter := &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](5)}
	longer := &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](60)}

	tests := []struct {
		name  string
		state func() *podState
		// first: the state was just created for this update.
		first  bool
		update UpdateOptions
		want   view
		result updateView
	}{
		{
			name: "new pod", state: func() *podState { return fresh(pod) }, first: true, update: create(pod),
			want:   view{Phase: SyncPod, Pending: "create a@1"},
			result: updateView{Wake: true},
		},
		{
			name: "newer update replaces the pending one",
			state: func() *podState {
				s := fresh(pod)
				s.update(create(pod), true, t0)
				return s
			},
			update: upd(v2),
			want:   view{Phase: SyncPod, Pending: "update a@2"},
			result: updateView{Wake: true},
		},
		{
			name: "kill: terminating with the spec's grace, sync cancelled", state: func() *podState { return syncing(pod) }, update: kill(pod, nil),
			want:   view{Phase: TerminatingPod, Started: true, Grace: 30, Pending: "kill a@1", Active: "create a@1"},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "kill with evict", state: func() *podState { return syncing(pod) }, update: kill(pod, &KillPodOptions{Evict: true}),
			want:   view{Phase: TerminatingPod, Started: true, Grace: 30, Evicted: true, Pending: "kill a@1", Active: "create a@1", Kills: 1},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "deletion timestamp: terminating, deleted, deletion grace", state: func() *podState { return syncing(pod) }, update: upd(newPod("a", version("2"), deleted(7))),
			want:   view{Phase: TerminatingPod, Started: true, Grace: 7, Deleted: true, Pending: "update a@2", Active: "create a@1"},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "terminal phase: terminating, not deleted", state: func() *podState { return syncing(pod) }, update: upd(newPod("a", version("2"), phase(v1.PodSucceeded))),
			want:   view{Phase: TerminatingPod, Started: true, Grace: 30, Pending: "update a@2", Active: "create a@1"},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "kill options on a running pod are answered at once", state: func() *podState { return syncing(pod) }, update: UpdateOptions{UpdateType: SyncPodUpdate, Pod: v2, KillPodOptions: done()},
			want:   view{Phase: SyncPod, Started: true, Pending: "update a@2", Active: "create a@1"},
			result: updateView{Wake: true, Completed: 1},
		},
		{
			name: "update while terminating: new pod object, still terminating, no cancel", state: func() *podState { return terminating(pod, 30) }, update: upd(v2),
			want:   view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, Pending: "update a@2", Active: "kill a@1", Kills: 1},
			result: updateView{Wake: true},
		},
		{
			name: "shorter grace while terminating: shrinks and cancels", state: func() *podState { return terminating(pod, 30) }, update: kill(pod, shorter),
			want:   view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 5, Pending: "kill a@1", Active: "kill a@1", Kills: 2},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "longer grace while terminating: never grows", state: func() *podState { return terminating(pod, 30) }, update: kill(pod, longer),
			want:   view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, Pending: "kill a@1", Active: "kill a@1", Kills: 2},
			result: updateView{Wake: true},
		},
		{
			name: "shorter deletion grace while terminating: shrinks and cancels", state: func() *podState { return terminating(pod, 30) }, update: upd(newPod("a", version("2"), deleted(4))),
			want:   view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 4, Deleted: true, Pending: "update a@2", Active: "kill a@1", Kills: 1},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "create of a terminating UID: ignored, restart requested", state: func() *podState { return terminating(pod, 30) }, update: create(v2),
			want:   view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, RestartRequested: true, Active: "kill a@1", Kills: 1},
			result: updateView{Ignored: true},
		},
		{
			name: "kill of a terminated pod: answered at once", state: func() *podState { return terminated(pod) }, update: kill(pod, done()),
			want:   view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Grace: 30, Pending: "kill a@1", Active: "kill a@1", Kills: 1},
			result: updateView{Wake: true, Completed: 1},
		},
		{
			name: "runtime kill of a terminated pod: ignored", state: func() *podState { return terminated(pod) }, update: runtimeKill("a"),
			want:   view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Grace: 30, ObservedRuntime: true, Active: "kill a@1", Kills: 1},
			result: updateView{Ignored: true},
		},
		{
			name: "UID reuse: create of a finished pod ignored, restart requested", state: func() *podState { return finished(pod) }, update: create(v2),
			want:   view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 30, RestartRequested: true, Active: "kill a@1", Kills: 1},
			result: updateView{Ignored: true},
		},
		{
			name: "UID reuse: update of a finished pod ignored", state: func() *podState { return finished(pod) }, update: upd(v2),
			want:   view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 30, Active: "kill a@1", Kills: 1},
			result: updateView{Ignored: true},
		},
		{
			name: "UID reuse: kill of a finished pod answered", state: func() *podState { return finished(pod) }, update: kill(pod, done()),
			want:   view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 30, Active: "kill a@1", Kills: 1},
			result: updateView{Ignored: true, Completed: 1},
		},
		{
			name: "orphan kill of an unknown pod: runtime only, grace 1",
			state: func() *podState {
				return newPodState("r", runtimeKill("r"), false, t0)
			},
			first: true, update: runtimeKill("r"),
			want:   view{Phase: TerminatingPod, Grace: 1, Deleted: true, ObservedRuntime: true, Pending: "kill runtime r"},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "orphan kill of a known pod: acts on the known pod", state: func() *podState { return syncing(pod) }, update: runtimeKill("a"),
			want:   view{Phase: TerminatingPod, Started: true, Grace: 30, Deleted: true, ObservedRuntime: true, Pending: "kill a@1", Active: "create a@1"},
			result: updateView{Wake: true, Cancel: true},
		},
		{
			name: "terminal pod seen first with nothing running: terminated at once",
			state: func() *podState {
				p := newPod("a", phase(v1.PodFailed))
				return newPodState("a", create(p), true, t0)
			},
			first: true, update: create(newPod("a", phase(v1.PodFailed))),
			want:   view{Phase: TerminatedPod, StartedTerminating: true, Pending: "create a@1"},
			result: updateView{Wake: true},
		},
		{
			name: "terminal pod seen first with containers running: terminating",
			state: func() *podState {
				p := newPod("a", phase(v1.PodFailed))
				return newPodState("a", create(p), false, t0)
			},
			first: true, update: create(newPod("a", phase(v1.PodFailed))),
			want:   view{Phase: TerminatingPod, Grace: 30, Pending: "create a@1"},
			result: updateView{Wake: true, Cancel: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state()
			r := s.update(tt.update, tt.first, t0.Add(time.Second))
			if diff := cmp.Diff(tt.want, viewOf(s)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			got := updateView{Ignored: r.ignored != "", Wake: r.wake, Cancel: r.cancel, Completed: len(r.completed)}
			if diff := cmp.Diff(tt.result, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// workView is the part of a work the tests compare.
type workView struct {
	Kind       workKind
	UpdateType UpdateType
	Pod        string
	Runtime    bool
	Grace      int64
	StatusFn   bool
	Completed  int
}

func TestTake(t *testing.T) {
	pod := newPod("a")
	sp := newPod("s", static)
	withPending := func(s *podState, u UpdateOptions) *podState { s.update(u, false, t0); return s }
	tests := []struct {
		name     string
		state    func() *podState
		mayStart bool
		want     workView
		wantView view
	}{
		{
			name: "nothing pending", state: func() *podState { return syncing(pod) }, mayStart: true,
			want:     workView{Kind: workNone},
			wantView: view{Phase: SyncPod, Started: true, Active: "create a@1"},
		},
		{
			name: "first sync", state: func() *podState { return withPending(fresh(pod), create(pod)) }, mayStart: true,
			want:     workView{Kind: workSync, UpdateType: SyncPodCreate, Pod: "a@1"},
			wantView: view{Phase: SyncPod, Started: true, Active: "create a@1"},
		},
		{
			name: "static pod whose name is held waits", state: func() *podState { return withPending(fresh(sp), create(sp)) }, mayStart: false,
			want:     workView{Kind: workWait},
			wantView: view{Phase: SyncPod, Pending: "create s@1"},
		},
		{
			name: "static pod whose name is free starts", state: func() *podState { return withPending(fresh(sp), create(sp)) }, mayStart: true,
			want:     workView{Kind: workSync, UpdateType: SyncPodCreate, Pod: "s@1"},
			wantView: view{Phase: SyncPod, Started: true, Active: "create s@1"},
		},
		{
			name: "static pod killed before it started: dropped, kill answered",
			state: func() *podState {
				s := withPending(fresh(sp), create(sp))
				return withPending(s, kill(sp, &KillPodOptions{CompletedCh: make(chan struct{})}))
			},
			want:     workView{Kind: workDrop, Completed: 1},
			wantView: view{Phase: TerminatedPod, Finished: true, Grace: 30, Kills: 1},
		},
		{
			name: "non-static pod killed before it started: terminated properly",
			state: func() *podState {
				return withPending(withPending(fresh(pod), create(pod)), kill(pod, nil))
			},
			want:     workView{Kind: workTerminating, UpdateType: SyncPodKill, Pod: "a@1", Grace: 30},
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, Active: "kill a@1"},
		},
		{
			name: "terminating, with status functions of every kill",
			state: func() *podState {
				s := syncing(pod)
				s.update(kill(pod, &KillPodOptions{PodStatusFunc: func(*v1.PodStatus) {}}), false, t0)
				return withPending(s, kill(pod, &KillPodOptions{PodStatusFunc: func(*v1.PodStatus) {}, PodTerminationGracePeriodSecondsOverride: ptr[int64](9)}))
			},
			want:     workView{Kind: workTerminating, UpdateType: SyncPodKill, Pod: "a@1", Grace: 9, StatusFn: true},
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 9, Active: "kill a@1", Kills: 2},
		},
		{
			name: "orphan known only from the runtime", state: func() *podState {
				return withPending(newPodState("r", runtimeKill("r"), false, t0), runtimeKill("r"))
			},
			want:     workView{Kind: workTerminatingRuntime, UpdateType: SyncPodKill, Runtime: true, Grace: 1},
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 1, Deleted: true, ObservedRuntime: true, Active: "kill runtime r"},
		},
		{
			name: "terminated", state: func() *podState {
				s := terminating(pod, 30)
				s.complete(work{kind: workTerminating}, result{}, t0)
				return s
			},
			want:     workView{Kind: workTerminated, UpdateType: SyncPodKill, Pod: "a@1"},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Grace: 30, Active: "kill a@1", Kills: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state()
			w, completed := s.take(tt.mayStart, t0)
			got := workView{Kind: w.kind, UpdateType: w.updateType, Runtime: w.runningPod != nil, Grace: w.gracePeriod, StatusFn: w.statusFn != nil, Completed: len(completed)}
			if w.pod != nil {
				got.Pod = w.pod.Name + "@" + w.pod.ResourceVersion
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("work (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantView, viewOf(s)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusFuncAppliesKillsInOrder(t *testing.T) {
	s := syncing(newPod("a"))
	s.update(kill(newPod("a"), &KillPodOptions{PodStatusFunc: func(st *v1.PodStatus) { st.Reason = "Preempted"; st.Message = "first" }}), false, t0)
	s.update(kill(newPod("a"), &KillPodOptions{PodStatusFunc: func(st *v1.PodStatus) { st.Reason = "Evicted" }}), false, t0)
	w, _ := s.take(true, t0)
	var st v1.PodStatus
	w.statusFn(&st)
	if diff := cmp.Diff(v1.PodStatus{Reason: "Evicted", Message: "first"}, st); diff != "" {
		t.Errorf("status after the kills' functions (-want +got):\n%s", diff)
	}
}

// completionView is the part of a completion the tests compare.
type completionView struct {
	Requeue   requeue
	Wake      bool
	Exit      bool
	Forget    bool
	Completed int
}

func TestComplete(t *testing.T) {
	pod := newPod("a")
	boom := errors.New("boom")
	withKillChan := func() *podState {
		s := syncing(pod)
		s.update(kill(pod, &KillPodOptions{CompletedCh: make(chan struct{})}), false, t0)
		s.take(true, t0)
		return s
	}
	tests := []struct {
		name     string
		state    func() *podState
		work     workKind
		result   result
		want     completionView
		wantView view
	}{
		{
			name: "sync succeeded: resync", state: func() *podState { return syncing(pod) }, work: workSync,
			want:     completionView{Requeue: requeueResync},
			wantView: view{Phase: SyncPod, Started: true, Active: "create a@1"},
		},
		{
			name: "sync failed: back off", state: func() *podState { return syncing(pod) }, work: workSync, result: result{err: boom},
			want:     completionView{Requeue: requeueBackOff},
			wantView: view{Phase: SyncPod, Started: true, Active: "create a@1"},
		},
		{
			name: "sync terminal: terminating at once with the spec's grace", state: func() *podState { return syncing(pod) }, work: workSync, result: result{isTerminal: true},
			want:     completionView{Wake: true},
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, Pending: "create a@1", Active: "create a@1"},
		},
		{
			name: "sync cancelled by a kill: the kill runs next", state: func() *podState {
				s := syncing(pod)
				s.update(kill(pod, nil), false, t0)
				return s
			}, work: workSync, result: result{err: errors.New("context canceled"), cancelled: true},
			want:     completionView{Wake: true},
			wantView: view{Phase: TerminatingPod, Started: true, Grace: 30, Pending: "kill a@1", Active: "create a@1"},
		},
		{
			name: "terminating succeeded: terminated, kills answered, next phase at once", state: withKillChan, work: workTerminating,
			want:     completionView{Wake: true, Completed: 1},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Grace: 30, Pending: "kill a@1", Active: "kill a@1", Kills: 1},
		},
		{
			name: "terminating failed: back off, still terminating", state: withKillChan, work: workTerminating, result: result{err: boom},
			want:     completionView{Requeue: requeueBackOff},
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, Active: "kill a@1", Kills: 1},
		},
		{
			name: "terminated succeeded: finished, worker exits", state: func() *podState { return terminated(pod) }, work: workTerminated,
			want:     completionView{Exit: true},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 30, Active: "kill a@1", Kills: 1},
		},
		{
			name: "terminated failed: back off", state: func() *podState { return terminated(pod) }, work: workTerminated, result: result{err: boom},
			want:     completionView{Requeue: requeueBackOff},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Grace: 30, Active: "kill a@1", Kills: 1},
		},
		{
			name: "runtime pod stopped: worker exits and is forgotten", state: func() *podState {
				s := newPodState("r", runtimeKill("r"), false, t0)
				s.update(runtimeKill("r"), true, t0)
				s.take(true, t0)
				return s
			}, work: workTerminatingRuntime,
			want:     completionView{Exit: true, Forget: true},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 1, Deleted: true, ObservedRuntime: true, Active: "kill runtime r"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state()
			c := s.complete(work{kind: tt.work}, tt.result, t0)
			got := completionView{Requeue: c.requeue, Wake: c.wake, Exit: c.exit, Forget: c.forget, Completed: len(c.completed)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("completion (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantView, viewOf(s)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// knownView is the part of a known the tests compare.
type knownView struct {
	Remove    bool
	Wake      bool
	Cancel    bool
	Completed int
}

func TestReconcile(t *testing.T) {
	pod := newPod("a")
	tests := []struct {
		name     string
		state    func() *podState
		desired  bool
		want     knownView
		wantView view
		wantSync PodWorkerSync
	}{
		{
			name: "desired and running: kept", state: func() *podState { return syncing(pod) }, desired: true,
			wantView: view{Phase: SyncPod, Started: true, Active: "create a@1"},
			wantSync: PodWorkerSync{State: SyncPod, HasConfig: true},
		},
		{
			name: "not desired, finished: forgotten", state: func() *podState { return finished(pod) },
			want:     knownView{Remove: true},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 30, Active: "kill a@1", Kills: 1},
		},
		{
			name: "not desired, running: orphan, terminates itself", state: func() *podState { return syncing(pod) },
			want:     knownView{Wake: true, Cancel: true},
			wantView: view{Phase: TerminatingPod, Started: true, Grace: 30, Deleted: true, Pending: "create a@1", Active: "create a@1"},
			wantSync: PodWorkerSync{State: TerminatingPod, Orphan: true, HasConfig: true},
		},
		{
			name: "not desired, terminating: kept and driven on", state: func() *podState { return terminating(pod, 30) },
			want:     knownView{Wake: true},
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, Deleted: true, Pending: "kill a@1", Active: "kill a@1", Kills: 1},
			wantSync: PodWorkerSync{State: TerminatingPod, Orphan: true, HasConfig: true},
		},
		{
			name: "not desired, terminated not finished: kept and driven on", state: func() *podState {
				s := terminating(pod, 30)
				s.complete(work{kind: workTerminating}, result{}, t0)
				s.take(true, t0)
				return s
			},
			want:     knownView{Wake: true},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Grace: 30, Deleted: true, Pending: "kill a@1", Active: "kill a@1", Kills: 1},
			wantSync: PodWorkerSync{State: TerminatedPod, Orphan: true, HasConfig: true},
		},
		{
			name: "not desired, never started: forgotten", state: func() *podState {
				s := fresh(newPod("s", static))
				s.update(create(newPod("s", static)), true, t0)
				return s
			},
			want:     knownView{Remove: true},
			wantView: view{Phase: SyncPod, Deleted: true, Pending: "create s@1"},
		},
		{
			name: "desired, restart requested, finished: forgotten to start afresh", state: func() *podState {
				s := terminated(pod)
				s.update(create(pod), false, t0)
				s.complete(work{kind: workTerminated}, result{}, t0)
				return s
			}, desired: true,
			want:     knownView{Remove: true},
			wantView: view{Phase: TerminatedPod, Started: true, StartedTerminating: true, Finished: true, Grace: 30, RestartRequested: true, Active: "kill a@1", Kills: 1},
		},
		{
			name: "desired, restart requested, not finished: kept", state: func() *podState {
				s := terminating(pod, 30)
				s.update(create(pod), false, t0)
				return s
			}, desired: true,
			wantView: view{Phase: TerminatingPod, Started: true, StartedTerminating: true, Grace: 30, RestartRequested: true, Active: "kill a@1", Kills: 1},
			wantSync: PodWorkerSync{State: TerminatingPod, HasConfig: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state()
			k := s.reconcile(tt.desired, t0)
			got := knownView{Remove: k.remove, Wake: k.wake, Cancel: k.cancel, Completed: len(k.completed)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reconcile (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantView, viewOf(s)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if !k.remove {
				if diff := cmp.Diff(tt.wantSync, s.sync(!tt.desired)); diff != "" {
					t.Errorf("sync summary (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestUIDReuseCycle(t *testing.T) {
	pod := newPod("a")
	s := finished(pod)
	if r := s.update(create(pod), false, t0); r.ignored == "" {
		t.Fatalf("update of a finished UID accepted, want ignored")
	}
	if k := s.reconcile(false, t0); !k.remove {
		t.Fatalf("finished UID not in the desired set kept, want forgotten")
	}
	// The shell drops the state; the UID comes back as new.
	s = fresh(pod)
	if r := s.update(create(pod), true, t0); r.ignored != "" || !r.wake {
		t.Fatalf("update of a forgotten UID: %+v, want accepted", r)
	}
	if w, _ := s.take(true, t0); w.kind != workSync {
		t.Errorf("work after UID reuse = %v, want sync", w.kind)
	}
}

func TestStaticNames(t *testing.T) {
	type step struct {
		op       string // "wait", "allow", "release"
		uid      types.UID
		want     bool        // allow
		wantWake []types.UID // release
	}
	tests := []struct {
		name string
		// ineligible UIDs are stopped or forgotten.
		ineligible map[types.UID]bool
		steps      []step
	}{
		{
			name: "first comes first, the second waits until release",
			steps: []step{
				{op: "wait", uid: "old"}, {op: "wait", uid: "new"},
				{op: "allow", uid: "new", want: false},
				{op: "allow", uid: "old", want: true},
				{op: "allow", uid: "old", want: true},
				{op: "allow", uid: "new", want: false},
				{op: "release", uid: "old", wantWake: []types.UID{"new"}},
				{op: "allow", uid: "new", want: true},
			},
		},
		{
			name:       "a stopped pod ahead does not block",
			ineligible: map[types.UID]bool{"old": true},
			steps: []step{
				{op: "wait", uid: "old"}, {op: "wait", uid: "new"},
				{op: "allow", uid: "new", want: true},
			},
		},
		{
			name: "release by a UID that does not hold the name keeps the holder",
			steps: []step{
				{op: "wait", uid: "a"}, {op: "wait", uid: "b"}, {op: "wait", uid: "c"},
				{op: "allow", uid: "a", want: true},
				{op: "release", uid: "b", wantWake: []types.UID{"c"}},
				{op: "allow", uid: "c", want: false},
				{op: "release", uid: "a", wantWake: []types.UID{"c"}},
				{op: "allow", uid: "c", want: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n staticNames
			eligible := func(uid types.UID) bool { return !tt.ineligible[uid] }
			for i, st := range tt.steps {
				switch st.op {
				case "wait":
					n.wait("ns/web", st.uid)
				case "allow":
					if got := n.allow("ns/web", st.uid, eligible); got != st.want {
						t.Errorf("step %d: allow(%s) = %v, want %v", i, st.uid, got, st.want)
					}
				case "release":
					if diff := cmp.Diff(st.wantWake, n.release("ns/web", st.uid)); diff != "" {
						t.Errorf("step %d: release(%s) woken (-want +got):\n%s", i, st.uid, diff)
					}
				}
			}
		})
	}
}

func TestQueries(t *testing.T) {
	pod := newPod("a")
	type answers struct {
		KnownTerminated, CouldRun, ContainersTerminating, TerminationRequested, RuntimeRemoved, ContentRemoved bool
	}
	tests := []struct {
		name   string
		state  *podState
		synced bool
		want   answers
	}{
		{name: "unknown before SyncKnownPods", want: answers{CouldRun: true}},
		{name: "unknown after SyncKnownPods", synced: true, want: answers{ContainersTerminating: true, RuntimeRemoved: true, ContentRemoved: true}},
		{name: "syncing", state: syncing(pod), synced: true, want: answers{CouldRun: true}},
		{name: "termination requested, not yet seen", state: func() *podState {
			s := syncing(pod)
			s.update(kill(pod, nil), false, t0)
			return s
		}(), synced: true, want: answers{CouldRun: true, TerminationRequested: true}},
		{name: "terminating", state: terminating(pod, 30), synced: true, want: answers{CouldRun: true, ContainersTerminating: true, TerminationRequested: true}},
		{name: "terminated, not deleted", state: terminated(pod), synced: true, want: answers{KnownTerminated: true, ContainersTerminating: true, TerminationRequested: true, RuntimeRemoved: true}},
		{name: "terminated, deleted", state: func() *podState {
			s := terminating(pod, 30)
			s.update(upd(newPod("a", deleted(30))), false, t0)
			s.take(true, t0)
			s.complete(work{kind: workTerminating}, result{}, t0)
			return s
		}(), synced: true, want: answers{KnownTerminated: true, ContainersTerminating: true, TerminationRequested: true, RuntimeRemoved: true, ContentRemoved: true}},
		{name: "evicted, still terminating", state: func() *podState {
			s := syncing(pod)
			s.update(kill(pod, &KillPodOptions{Evict: true}), false, t0)
			s.take(true, t0)
			return s
		}(), synced: true, want: answers{CouldRun: true, ContainersTerminating: true, TerminationRequested: true, ContentRemoved: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := answers{
				KnownTerminated:       isPodKnownTerminated(tt.state),
				CouldRun:              couldHaveRunningContainers(tt.state, tt.synced),
				ContainersTerminating: shouldPodContainersBeTerminating(tt.state, tt.synced),
				TerminationRequested:  isPodTerminationRequested(tt.state),
				RuntimeRemoved:        shouldPodRuntimeBeRemoved(tt.state, tt.synced),
				ContentRemoved:        shouldPodContentBeRemoved(tt.state, tt.synced),
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("queries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeStopped(t *testing.T) {
	tests := []struct {
		name   string
		status *runtime.PodStatus
		want   bool
	}{
		{name: "nil", want: true},
		{name: "empty", status: &runtime.PodStatus{}, want: true},
		{name: "exited", status: &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{State: runtime.ContainerStateExited}}}, want: true},
		{name: "running container", status: &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{{State: runtime.ContainerStateRunning}}}},
		{name: "ready sandbox", status: &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{{State: runtimeapi.PodSandboxState_SANDBOX_READY}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runtimeStopped(tt.status); got != tt.want {
				t.Errorf("runtimeStopped = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		d    time.Duration
		r    float64
		want time.Duration
	}{
		{d: time.Minute, r: 0, want: time.Minute},
		{d: time.Minute, r: 0.5, want: 75 * time.Second},
		{d: 10 * time.Second, r: 0.999, want: 14995 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := jitter(tt.d, tt.r); got != tt.want {
			t.Errorf("jitter(%v, %v) = %v, want %v", tt.d, tt.r, got, tt.want)
		}
	}
}

func TestIsStatic(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{name: "no annotation"},
		{name: "api", annotations: map[string]string{sources.AnnotationSource: sources.APIServerSource}},
		{name: "file", annotations: map[string]string{sources.AnnotationSource: sources.FileSource}, want: true},
		{name: "http", annotations: map[string]string{sources.AnnotationSource: sources.HTTPSource}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("a", func(p *v1.Pod) { p.Annotations = tt.annotations })
			if got := podmodel.IsStatic(pod); got != tt.want {
				t.Errorf("isStatic = %v, want %v", got, tt.want)
			}
		})
	}
}

// The queue map is dropped once no name waits: a burst of static pods
// grows it to every pod, and a map keeps the room it grew to.
func TestStaticNamesWaitingDroppedWhenEmpty(t *testing.T) {
	var n staticNames
	eligible := func(types.UID) bool { return true }
	n.wait("ns/a", "1")
	n.wait("ns/b", "2")
	n.wait("ns/b", "3")
	if !n.allow("ns/a", "1", eligible) || !n.allow("ns/b", "2", eligible) {
		t.Fatal("the first UID of a name may not start")
	}
	if n.waiting == nil {
		t.Fatal("the queue map was dropped while ns/b/3 waits")
	}
	if rest := n.release("ns/b", "2"); len(rest) != 1 || rest[0] != "3" {
		t.Fatalf("release(ns/b, 2) = %v, want [3]", rest)
	}
	if !n.allow("ns/b", "3", eligible) {
		t.Fatal("ns/b/3 may not start after ns/b/2 released the name")
	}
	if n.waiting != nil {
		t.Errorf("waiting = %v with no name waiting, want the map dropped", n.waiting)
	}
}
