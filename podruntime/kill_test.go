package podruntime

import (
	"context"
	sysruntime "runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

func TestKillPodGracePeriods(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		edit     func(pod *v1.Pod)
		orphan   bool
		override *int64
		want     int64
	}{
		{name: "spec grace period", want: 30},
		{name: "deletion grace period wins", edit: func(p *v1.Pod) { p.DeletionGracePeriodSeconds = ptr(int64(5)) }, want: 5},
		{name: "below the minimum", edit: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(0)) }, want: 2},
		{name: "custom minimum", opts: Options{MinGracePeriod: 5 * time.Second},
			edit: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(1)) }, want: 5},
		{name: "override may go below the minimum", override: ptr(int64(0)), want: 0},
		{name: "unset spec uses the API default", edit: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }, want: 30},
		{name: "orphan uses the recorded grace period", orphan: true,
			edit: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(45)) }, want: 45},
		{name: "orphan with a short recorded grace period gets the minimum", orphan: true,
			edit: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(1)) }, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, tt.opts)
			pod := testPod("kill", "a", "b")
			if tt.edit != nil {
				tt.edit(pod)
			}
			if err := f.sync(t, pod).Err(); err != nil {
				t.Fatal(err)
			}
			running := runtime.RunningPod(f.status(t, pod))
			f.calls()
			f.rec.stopTimeouts()
			target := pod
			if tt.orphan {
				target = nil
			}
			if err := f.m.KillPod(t.Context(), target, running, tt.override); err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{f.container(pod, "a").Id: tt.want, f.container(pod, "b").Id: tt.want}
			if diff := cmp.Diff(want, f.rec.stopTimeouts()); diff != "" {
				t.Errorf("stop timeouts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"StopContainer", "StopContainer", "StopPodSandbox"}, f.calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKillPodStopsContainersInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakes(t, Options{})
		pod := testPod("parallel", "a", "b", "c")
		if err := f.sync(t, pod).Err(); err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			arrived int
			all     = make(chan struct{})
			serial  bool
		)
		f.rec.stopHook = func(string) {
			mu.Lock()
			arrived++
			if arrived == 3 {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(time.Minute):
				mu.Lock()
				serial = true
				mu.Unlock()
			}
		}
		if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
			t.Fatal(err)
		}
		if serial {
			t.Error("containers were stopped one after the other")
		}
		st := f.status(t, pod)
		for _, c := range st.ContainerStatuses {
			if c.State != runtime.ContainerStateExited {
				t.Errorf("container %s is %s after KillPod", c.Name, c.State)
			}
		}
		if got := st.SandboxStatuses[0].GetState().String(); got != "SANDBOX_NOTREADY" {
			t.Errorf("sandbox state = %s", got)
		}
	})
}

// TestKillPodOneContainerNoGoroutine: a pod of one container is stopped
// on KillPod's goroutine, not on one made for it: under churn every pod
// deleted at once would hold a goroutine more while its container stops,
// and the Go runtime keeps a descriptor of each goroutine of the
// process's peak for as long as it runs.
func TestKillPodOneContainerNoGoroutine(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("one", "a")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	var stack string
	f.rec.stopHook = func(string) {
		buf := make([]byte, 64<<10)
		stack = string(buf[:sysruntime.Stack(buf, false)])
	}
	if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stack, ").KillPod(") {
		t.Errorf("the container was stopped on a goroutine of its own:\n%s", stack)
	}
}

func TestKillPodNeedsAPod(t *testing.T) {
	f := newFakes(t, Options{})
	if err := f.m.KillPod(t.Context(), nil, nil, nil); err == nil {
		t.Error("KillPod(nil, nil) succeeded")
	}
}

func TestSyncPodProbeKillUsesProbeGracePeriod(t *testing.T) {
	failed := map[string]bool{}
	var mu sync.Mutex
	f := newFakes(t, Options{})
	f.unhealthy = func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		if failed[id] {
			return "liveness"
		}
		return ""
	}
	pod := testPod("probe", "a")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: ptr(int64(7))}
	f.sync(t, pod)
	id := f.container(pod, "a").Id
	mu.Lock()
	failed[id] = true
	mu.Unlock()
	f.rec.stopTimeouts()
	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{id: 7}, f.rec.stopTimeouts()); diff != "" {
		t.Errorf("stop timeouts (-want +got):\n%s", diff)
	}
	if got := startedNames(res); !cmp.Equal(got, []string{"a"}) {
		t.Errorf("started %v, want the restarted container", got)
	}
}

func TestRemovePod(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("rm", "a")
	other := testPod("keep", "a")
	f.sync(t, pod)
	f.sync(t, other)
	if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.m.RemovePod(t.Context(), pod.UID); err != nil {
		t.Fatal(err)
	}
	pods, err := f.m.GetPods(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, p := range pods {
		uids = append(uids, p.ID)
	}
	if diff := cmp.Diff([]types.UID{other.UID}, uids); diff != "" {
		t.Errorf("pods after RemovePod (-want +got):\n%s", diff)
	}
}

// ctxKey checks that KillPod passes the caller's context down.
type ctxKey struct{}

func TestKillPodPassesContext(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("ctx", "a")
	pod.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	f.sync(t, pod)
	var seen any
	f.rec.stopHook = func(string) {}
	ctx := context.WithValue(t.Context(), ctxKey{}, "v")
	wrapped := &ctxRecorder{recorder: f.rec, seen: &seen}
	m, err := New(wrapped, f.is, Options{PodLogsDir: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.KillPod(ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if seen != "v" {
		t.Errorf("StopContainer saw context value %v", seen)
	}
}

type ctxRecorder struct {
	*recorder
	seen *any
}

func (r *ctxRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	*r.seen = ctx.Value(ctxKey{})
	return r.recorder.StopContainer(ctx, id, timeout)
}
