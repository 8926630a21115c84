package probe

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// settle lets the manager start (more than a period, so that no first
// probe is jittered) and returns when every goroutine is idle.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestWorkerInitialResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		h.start = time.Now()

		pod := testPod("p1", execProbe(nil), execProbe(nil), execProbe(nil))
		h.setStatus(pod, runningStatus("c1", time.Now(), false))
		h.setScript(Startup, Failure)
		h.m.AddPod(pod)
		synctest.Wait()

		got := h.takeUpdates()
		slices.SortFunc(got, func(a, b rec) int { return cmpString(string(a.Type), string(b.Type)) })
		want := []rec{
			{Type: Liveness, Result: Success, ID: "c1"},
			{Type: Readiness, Result: Failure, ID: "c1"},
			{Type: Startup, Result: Unknown, ID: "c1"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("updates (-want +got):\n%s", diff)
		}
		// Only the startup probe runs before the container started.
		if diff := cmp.Diff(map[Type][]time.Duration{Startup: secs(0)}, h.calls); diff != "" {
			t.Errorf("probe calls (-want +got):\n%s", diff)
		}
		if got := h.m.Unhealthy("c1"); got != "" {
			t.Errorf("Unhealthy = %q, want none", got)
		}
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestWorkerThresholds(t *testing.T) {
	tests := []struct {
		name   string
		typ    Type
		probe  *v1.Probe
		script []Result
		// until is how long the worker runs.
		until time.Duration
		want  []rec
		calls []time.Duration
	}{{
		name:   "readiness needs successThreshold successes and failureThreshold failures in a row",
		typ:    Readiness,
		probe:  execProbe(func(p *v1.Probe) { p.SuccessThreshold, p.FailureThreshold = 2, 3 }),
		script: []Result{Success, Failure, Success, Success, Failure, Failure, Success, Failure, Failure, Failure, Success},
		until:  10 * time.Second,
		want: []rec{
			{Type: Readiness, Result: Failure, ID: "c1"},
			{Type: Readiness, Result: Success, ID: "c1", At: 3 * time.Second},
			{Type: Readiness, Result: Failure, ID: "c1", At: 9 * time.Second},
		},
		calls: secs(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
	}, {
		name:   "results are published only when they change",
		typ:    Readiness,
		probe:  execProbe(nil),
		script: []Result{Success},
		until:  5 * time.Second,
		want: []rec{
			{Type: Readiness, Result: Failure, ID: "c1"},
			{Type: Readiness, Result: Success, ID: "c1"},
		},
		calls: secs(0, 1, 2, 3, 4, 5),
	}, {
		name:   "liveness fails after failureThreshold failures, then holds",
		typ:    Liveness,
		probe:  execProbe(func(p *v1.Probe) { p.FailureThreshold = 3 }),
		script: []Result{Failure, Success, Failure, Failure, Failure, Success},
		until:  10 * time.Second,
		want: []rec{
			{Type: Liveness, Result: Success, ID: "c1"},
			{Type: Liveness, Result: Failure, ID: "c1", At: 4 * time.Second},
		},
		calls: secs(0, 1, 2, 3, 4),
	}, {
		name:   "default thresholds: one success, three failures",
		typ:    Readiness,
		probe:  execProbe(nil),
		script: []Result{Success, Failure, Failure, Failure},
		until:  5 * time.Second,
		want: []rec{
			{Type: Readiness, Result: Failure, ID: "c1"},
			{Type: Readiness, Result: Success, ID: "c1"},
			{Type: Readiness, Result: Failure, ID: "c1", At: 3 * time.Second},
		},
		calls: secs(0, 1, 2, 3, 4, 5),
	}, {
		name:   "period",
		typ:    Readiness,
		probe:  execProbe(func(p *v1.Probe) { p.PeriodSeconds = 4 }),
		script: []Result{Failure},
		until:  13 * time.Second,
		want:   []rec{{Type: Readiness, Result: Failure, ID: "c1"}},
		calls:  secs(0, 4, 8, 12),
	}, {
		name:   "initial delay counts from the container's start",
		typ:    Readiness,
		probe:  execProbe(func(p *v1.Probe) { p.InitialDelaySeconds, p.PeriodSeconds = 5, 2 }),
		script: []Result{Success},
		until:  9 * time.Second,
		want: []rec{
			{Type: Readiness, Result: Failure, ID: "c1"},
			{Type: Readiness, Result: Success, ID: "c1", At: 4 * time.Second},
		},
		// The container started 1s before the worker: at 4s it has run 5s.
		calls: secs(4, 6, 8),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				stop := h.run()
				defer stop()
				settle(time.Minute)

				var pod *v1.Pod
				switch tc.typ {
				case Liveness:
					pod = testPod("p1", tc.probe, nil, nil)
				case Readiness:
					pod = testPod("p1", nil, tc.probe, nil)
				}
				h.setStatus(pod, runningStatus("c1", time.Now().Add(-time.Second), true))
				h.setScript(tc.typ, tc.script...)
				h.start = time.Now()
				h.m.AddPod(pod)
				settle(tc.until)
				if diff := cmp.Diff(tc.want, h.takeUpdates()); diff != "" {
					t.Errorf("updates (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.calls, h.callTimes(tc.typ)); diff != "" {
					t.Errorf("probe times (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestWorkerHoldsUntilNewContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		h.start = time.Now()

		pod := testPod("p1", execProbe(func(p *v1.Probe) { p.FailureThreshold = 1 }), nil, nil)
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.setScript(Liveness, Failure)
		h.m.AddPod(pod)
		settle(5 * time.Second)
		if got := h.m.Unhealthy("c1"); got != "liveness" {
			t.Errorf("Unhealthy(c1) = %q, want liveness", got)
		}
		if got := h.m.Unhealthy("fake://c1"); got != "liveness" {
			t.Errorf("Unhealthy(fake://c1) = %q, want liveness", got)
		}
		if diff := cmp.Diff(secs(0), h.callTimes(Liveness)); diff != "" {
			t.Errorf("probe times while held (-want +got):\n%s", diff)
		}

		// The container is restarted: new ID, results start over.
		h.setScript(Liveness, Success)
		h.setStatus(pod, runningStatus("c2", time.Now(), true))
		settle(2 * time.Second)
		want := []rec{
			{Type: Liveness, Result: Success, ID: "c1"},
			{Type: Liveness, Result: Failure, ID: "c1"},
			{Type: Liveness, Result: Success, ID: "c2", At: 6 * time.Second},
		}
		if diff := cmp.Diff(want, h.takeUpdates()); diff != "" {
			t.Errorf("updates (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(secs(0, 6, 7), h.callTimes(Liveness)); diff != "" {
			t.Errorf("probe times (-want +got):\n%s", diff)
		}
		if got := h.m.Unhealthy("c1"); got != "" {
			t.Errorf("Unhealthy(c1) after the restart = %q, want none (forgotten)", got)
		}
		if got := h.m.Unhealthy("c2"); got != "" {
			t.Errorf("Unhealthy(c2) = %q, want none", got)
		}
	})
}

func TestWorkerStartupGatesLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.autoSync = true
		stop := h.run()
		defer stop()
		settle(time.Minute)
		h.start = time.Now()

		pod := testPod("p1",
			execProbe(func(p *v1.Probe) { p.FailureThreshold = 1 }),
			nil,
			execProbe(func(p *v1.Probe) { p.FailureThreshold = 10 }))
		h.setStatus(pod, runningStatus("c1", time.Now(), false))
		h.setScript(Startup, Failure, Failure, Success)
		h.setScript(Liveness, Failure)
		h.m.AddPod(pod)
		settle(1500 * time.Millisecond)
		if got := h.callTimes(Liveness); len(got) != 0 {
			t.Errorf("liveness probed at %v before the container started", got)
		}
		if got := h.m.Unhealthy("c1"); got != "" {
			t.Errorf("Unhealthy before start = %q", got)
		}
		settle(3 * time.Second)

		// Startup succeeded at 2s; the sync marked the container started
		// and liveness ran from the next period on.
		if diff := cmp.Diff(secs(0, 1, 2), h.callTimes(Startup)); diff != "" {
			t.Errorf("startup probe times (-want +got):\n%s", diff)
		}
		if got := h.callTimes(Liveness); len(got) != 1 || got[0] < 2*time.Second || got[0] > 3*time.Second {
			t.Errorf("liveness probe times = %v, want one, within a period of the startup success", got)
		}
		if got := h.m.Unhealthy("c1"); got != "liveness" {
			t.Errorf("Unhealthy = %q, want liveness", got)
		}
		st, _ := h.status(pod.UID)
		if s := st.ContainerStatuses[0].Started; s == nil || !*s {
			t.Errorf("Started = %v, want true", s)
		}
	})
}

func TestWorkerStartupFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		h.start = time.Now()

		pod := testPod("p1", execProbe(nil), nil, execProbe(func(p *v1.Probe) { p.FailureThreshold = 2 }))
		h.setStatus(pod, runningStatus("c1", time.Now(), false))
		h.setScript(Startup, Failure)
		h.m.AddPod(pod)
		settle(5 * time.Second)
		if got := h.m.Unhealthy("c1"); got != "startup" {
			t.Errorf("Unhealthy = %q, want startup", got)
		}
		if diff := cmp.Diff(secs(0, 1), h.callTimes(Startup)); diff != "" {
			t.Errorf("startup probe times: held after the failure (-want +got):\n%s", diff)
		}
		if got := h.callTimes(Liveness); len(got) != 0 {
			t.Errorf("liveness probed at %v", got)
		}
	})
}

func TestWorkerStops(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		// containerPolicy is the container's own restartPolicy.
		containerPolicy *v1.ContainerRestartPolicy
		status          v1.PodStatus
		want            []rec
		workers         int
	}{{
		name:            "exited container with restartPolicy Always under pod Never: keeps its worker",
		policy:          v1.RestartPolicyNever,
		containerPolicy: &always,
		status:          exitedStatus("c1"),
		want:            []rec{{Type: Readiness, Result: Failure, ID: "c1"}},
		workers:         1,
	}, {
		name:    "exited container under restartPolicy Never",
		policy:  v1.RestartPolicyNever,
		status:  exitedStatus("c1"),
		want:    []rec{{Type: Readiness, Result: Failure, ID: "c1"}},
		workers: 0,
	}, {
		name:    "exited container that will restart: failure, keeps its worker",
		policy:  v1.RestartPolicyAlways,
		status:  exitedStatus("c1"),
		want:    []rec{{Type: Readiness, Result: Failure, ID: "c1"}},
		workers: 1,
	}, {
		name:    "terminal pod",
		policy:  v1.RestartPolicyAlways,
		status:  v1.PodStatus{Phase: v1.PodSucceeded},
		workers: 0,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				stop := h.run()
				defer stop()
				settle(time.Minute)
				h.start = time.Now()

				pod := testPod("p1", nil, execProbe(nil), nil)
				pod.Spec.RestartPolicy = tc.policy
				pod.Spec.Containers[0].RestartPolicy = tc.containerPolicy
				// The container ran and was ready; then the status changes.
				h.setStatus(pod, runningStatus("c1", time.Now(), true))
				h.m.AddPod(pod)
				settle(500 * time.Millisecond)
				h.takeUpdates()
				h.setStatus(pod, tc.status)
				settle(2 * time.Second)
				got := h.takeUpdates()
				for i := range got {
					got[i].At = 0
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("updates (-want +got):\n%s", diff)
				}
				if got := h.m.workerCount(); got != tc.workers {
					t.Errorf("workers = %d, want %d", got, tc.workers)
				}
				if tc.workers == 0 && h.m.readiness.len() != 0 {
					t.Errorf("results of a stopped worker kept: %d", h.m.readiness.len())
				}
			})
		})
	}
}

func TestWorkerProberErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		h.start = time.Now()

		pod := testPod("p1", nil, execProbe(nil), nil)
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.errs[Readiness] = errors.New("cannot probe")
		h.m.AddPod(pod)
		settle(1500 * time.Millisecond)
		// Three tries per period, the result (initial Failure) kept.
		if diff := cmp.Diff(secs(0, 0, 0, 1, 1, 1), h.callTimes(Readiness)); diff != "" {
			t.Errorf("probe times (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]rec{{Type: Readiness, Result: Failure, ID: "c1"}}, h.takeUpdates()); diff != "" {
			t.Errorf("updates (-want +got):\n%s", diff)
		}
		h.mu.Lock()
		h.errs[Readiness] = nil
		h.mu.Unlock()
		settle(time.Second)
		if diff := cmp.Diff([]rec{{Type: Readiness, Result: Success, ID: "c1", At: 2 * time.Second}}, h.takeUpdates()); diff != "" {
			t.Errorf("updates (-want +got):\n%s", diff)
		}
		want := map[Type]map[Result]int{Readiness: {Unknown: 2, Success: 1}}
		h.mu.Lock()
		defer h.mu.Unlock()
		if diff := cmp.Diff(want, h.metrics); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
	})
}

func TestWorkerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)

		pod := testPod("p1", execProbe(func(p *v1.Probe) { p.FailureThreshold = 5 }), execProbe(nil), nil)
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.setScript(Liveness, Success, Failure, Success)
		h.setScript(Readiness, Failure, Failure, Success)
		h.m.AddPod(pod)
		settle(3500 * time.Millisecond)
		want := map[Type]map[Result]int{
			Liveness:  {Success: 3, Failure: 1},
			Readiness: {Success: 2, Failure: 2},
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if diff := cmp.Diff(want, h.metrics); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
	})
}

func TestWorkerJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.Alignment = -1 })
		// Pods added before Run, as after an agent restart.
		for _, uid := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
			pod := testPod(typesUID(uid), nil, execProbe(func(p *v1.Probe) { p.PeriodSeconds = 10 }), nil)
			h.setStatus(pod, runningStatus("c-"+uid, time.Now(), true))
			h.m.AddPod(pod)
		}
		stop := h.run()
		defer stop()
		settle(9999 * time.Millisecond)
		calls := h.callTimes(Readiness)
		if len(calls) != 10 {
			t.Fatalf("first probes at %v, want 10 within the period", calls)
		}
		distinct := map[time.Duration]bool{}
		for _, c := range calls {
			distinct[c] = true
		}
		if len(distinct) < 5 {
			t.Errorf("first probes at %v: not spread over the period", calls)
		}

		// A pod added later is probed at once.
		settle(time.Minute + 20*time.Millisecond)
		h.start = time.Now()
		h.mu.Lock()
		h.calls = map[Type][]time.Duration{}
		h.mu.Unlock()
		pod := testPod("late", nil, execProbe(func(p *v1.Probe) { p.PeriodSeconds = 10 }), nil)
		h.setStatus(pod, runningStatus("c-late", time.Now(), true))
		h.m.AddPod(pod)
		synctest.Wait()
		if diff := cmp.Diff(secs(0), h.callTimes(Readiness)); diff != "" {
			t.Errorf("probe times of a late pod (-want +got):\n%s", diff)
		}
	})
}

func TestWorkerAlignment(t *testing.T) {
	tests := []struct {
		name      string
		alignment time.Duration
		want      []time.Duration
	}{
		{"default 50ms: probes share ticks", 0, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 1050 * time.Millisecond, 1050 * time.Millisecond}},
		{"200ms", 200 * time.Millisecond, []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 1200 * time.Millisecond, 1200 * time.Millisecond}},
		{"disabled", -1, []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 1010 * time.Millisecond, 1030 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, func(o *Options) { o.Alignment = tc.alignment })
				stop := h.run()
				defer stop()
				settle(time.Minute)
				h.start = time.Now()
				for _, at := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond} {
					time.Sleep(at)
					pod := testPod(typesUID("p"+at.String()), nil, execProbe(nil), nil)
					h.setStatus(pod, runningStatus("c"+at.String(), time.Now(), true))
					h.m.AddPod(pod)
				}
				settle(1500 * time.Millisecond)
				got := h.callTimes(Readiness)
				slices.Sort(got)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("probe times (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestNextTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if got := nextTick(start, time.Second); !got.Equal(start.Add(time.Second)) {
			t.Errorf("nextTick on time = %v, want +1s", got.Sub(start))
		}
		time.Sleep(3500 * time.Millisecond) // a probe longer than its period
		if got := nextTick(start, time.Second); !got.Equal(start.Add(4 * time.Second)) {
			t.Errorf("nextTick late = %v, want +4s (missed ticks dropped)", got.Sub(start))
		}
	})
}

func TestWorkerDeletionTimestamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)

		pod := testPod("p1", execProbe(func(p *v1.Probe) { p.FailureThreshold = 1 }), nil, nil)
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.setScript(Liveness, Failure)
		h.m.AddPod(pod)
		settle(3 * time.Second)
		if got := h.callTimes(Liveness); len(got) != 0 {
			t.Errorf("liveness of a deleted pod probed at %v", got)
		}
		if got := h.m.Unhealthy("c1"); got != "" {
			t.Errorf("Unhealthy = %q, want none", got)
		}
		if got := h.m.workerCount(); got != 0 {
			t.Errorf("workers = %d, want 0", got)
		}
	})
}
