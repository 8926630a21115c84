package podworker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// fakeSync records every call, at its start, as one line, then calls the
// matching function field when set (nil: success).
type fakeSync struct {
	SyncPodF                   func(ctx context.Context, updateType UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error)
	SyncTerminatingPodF        func(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error
	SyncTerminatingRuntimePodF func(ctx context.Context, runningPod *runtime.Pod) error
	SyncTerminatedPodF         func(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error

	mu       sync.Mutex
	calls    []string
	inFlight map[types.UID]bool
	overlap  []types.UID
}

var _ SyncFuncs = (*fakeSync)(nil)

func podName(pod *v1.Pod) string { return pod.Name + "@" + pod.ResourceVersion }

func (f *fakeSync) enter(uid types.UID, line string) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight == nil {
		f.inFlight = map[types.UID]bool{}
	}
	if f.inFlight[uid] {
		f.overlap = append(f.overlap, uid)
	}
	f.inFlight[uid] = true
	f.calls = append(f.calls, line)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.inFlight[uid] = false
	}
}

func (f *fakeSync) SyncPod(ctx context.Context, updateType UpdateType, pod *v1.Pod, podStatus *runtime.PodStatus) (bool, error) {
	defer f.enter(pod.UID, fmt.Sprintf("SyncPod %s %s", updateType, podName(pod)))()
	if f.SyncPodF == nil {
		return false, nil
	}
	return f.SyncPodF(ctx, updateType, pod, podStatus)
}

func (f *fakeSync) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus, gracePeriod int64, podStatusFn func(*v1.PodStatus)) error {
	defer f.enter(pod.UID, fmt.Sprintf("SyncTerminatingPod %s grace=%d", podName(pod), gracePeriod))()
	if f.SyncTerminatingPodF == nil {
		return nil
	}
	return f.SyncTerminatingPodF(ctx, pod, podStatus, gracePeriod, podStatusFn)
}

func (f *fakeSync) SyncTerminatingRuntimePod(ctx context.Context, runningPod *runtime.Pod) error {
	defer f.enter(runningPod.ID, "SyncTerminatingRuntimePod "+runningPod.Name)()
	if f.SyncTerminatingRuntimePodF == nil {
		return nil
	}
	return f.SyncTerminatingRuntimePodF(ctx, runningPod)
}

func (f *fakeSync) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *runtime.PodStatus) error {
	defer f.enter(pod.UID, "SyncTerminatedPod "+podName(pod))()
	if f.SyncTerminatedPodF == nil {
		return nil
	}
	return f.SyncTerminatedPodF(ctx, pod, podStatus)
}

// inFlightUIDs returns the pods with a call in flight.
func (f *fakeSync) inFlightUIDs() []types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []types.UID
	for uid, in := range f.inFlight {
		if in {
			out = append(out, uid)
		}
	}
	return out
}

func (f *fakeSync) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// CallsOf returns the calls for one pod name.
func (f *fakeSync) CallsOf(name string) []string {
	var out []string
	for _, c := range f.Calls() {
		fields := strings.Fields(c)
		if len(fields) > 1 && (strings.HasPrefix(fields[len(fields)-1], name+"@") || strings.HasPrefix(fields[len(fields)-2], name+"@") || fields[len(fields)-1] == name) {
			out = append(out, c)
		}
	}
	return out
}

// fakeCache is a pleg.Cache that records GetNewerThan and answers at once
// with a status stamped now (or with err).
type fakeCache struct {
	mu       sync.Mutex
	reads    []cacheRead
	statuses map[types.UID]*runtime.PodStatus
	err      error
}

type cacheRead struct {
	UID     types.UID
	MinTime time.Time
}

var _ pleg.Cache = (*fakeCache)(nil)

func (c *fakeCache) Get(uid types.UID) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.statuses[uid]; ok {
		return st, nil
	}
	return &runtime.PodStatus{ID: uid}, nil
}

func (c *fakeCache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*runtime.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads = append(c.reads, cacheRead{UID: uid, MinTime: minTime})
	if c.err != nil {
		return nil, c.err
	}
	return &runtime.PodStatus{ID: uid, TimeStamp: time.Now()}, nil
}

func (c *fakeCache) Set(types.UID, *runtime.PodStatus, error, time.Time) {}
func (c *fakeCache) Delete(types.UID)                                    {}
func (c *fakeCache) UpdateTime(time.Time)                                {}

func (c *fakeCache) Reads() []cacheRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

// harness runs Workers inside a synctest bubble.
type harness struct {
	t      *testing.T
	w      *Workers
	sync   *fakeSync
	cache  *fakeCache
	queue  *Queue
	cancel context.CancelFunc
	done   chan error

	mu sync.Mutex
	// terminated are the pods told to Options.Terminated, in order.
	terminated []types.UID
}

func newHarness(t *testing.T, fs *fakeSync, logger logr.Logger) *harness {
	t.Helper()
	h := &harness{t: t, sync: fs, cache: &fakeCache{}, queue: NewQueue()}
	w, err := New(fs, Options{Cache: h.cache, Queue: h.queue, Logger: logger, Terminated: func(uid types.UID) {
		// Called without the workers' lock: asking them does not block.
		// A known pod is terminated by then.
		if h.w.CouldHaveRunningContainers(uid) && h.w.IsPodKnownTerminated(uid) {
			t.Errorf("Terminated(%s): the workers still say its containers could run", uid)
		}
		h.mu.Lock()
		h.terminated = append(h.terminated, uid)
		h.mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.w = w
	return h
}

// start runs Run in a goroutine.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(h.t.Context())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.w.Run(ctx) }()
	synctest.Wait()
}

func startHarness(t *testing.T, fs *fakeSync) *harness {
	h := newHarness(t, fs, logr.Discard())
	h.start()
	return h
}

// stop ends Run and checks it returned nil after its workers exited.
func (h *harness) stop() {
	h.t.Helper()
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run = %v, want nil", err)
	}
}

// update sends an update and waits until every worker is idle or blocked.
func (h *harness) update(opts UpdateOptions) {
	h.w.UpdatePod(opts)
	synctest.Wait()
}

func (h *harness) wantCalls(want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, h.sync.Calls()); diff != "" {
		h.t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// syncLoop does what the sync loop does every second: a SyncPodSync for
// every pod the queue says is due.
func (h *harness) syncLoop(pods ...*v1.Pod) {
	for _, uid := range h.queue.GetWork() {
		for _, p := range pods {
			if p.UID == uid {
				h.w.UpdatePod(UpdateOptions{UpdateType: SyncPodSync, Pod: p})
			}
		}
	}
	synctest.Wait()
}

// blockUntilCancelled is a sync that runs until its context ends.
func blockUntilCancelled(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestNew(t *testing.T) {
	valid := Options{Cache: &fakeCache{}, Queue: NewQueue()}
	tests := []struct {
		name    string
		sync    SyncFuncs
		opts    func(Options) Options
		wantErr bool
		want    [2]time.Duration
	}{
		{name: "defaults", sync: &fakeSync{}, opts: func(o Options) Options { return o }, want: [2]time.Duration{time.Minute, 10 * time.Second}},
		{name: "custom", sync: &fakeSync{}, opts: func(o Options) Options { o.ResyncInterval, o.BackOffPeriod = time.Second, 2*time.Second; return o }, want: [2]time.Duration{time.Second, 2 * time.Second}},
		{name: "no sync funcs", opts: func(o Options) Options { return o }, wantErr: true},
		{name: "no cache", sync: &fakeSync{}, opts: func(o Options) Options { o.Cache = nil; return o }, wantErr: true},
		{name: "no queue", sync: &fakeSync{}, opts: func(o Options) Options { o.Queue = nil; return o }, wantErr: true},
		{name: "negative resync", sync: &fakeSync{}, opts: func(o Options) Options { o.ResyncInterval = -1; return o }, wantErr: true},
		{name: "negative back-off", sync: &fakeSync{}, opts: func(o Options) Options { o.BackOffPeriod = -1; return o }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := New(tt.sync, tt.opts(valid))
			if tt.wantErr {
				if err == nil || !strings.HasPrefix(err.Error(), "podworker: ") {
					t.Errorf("New error = %v, want a podworker error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if diff := cmp.Diff(tt.want, [2]time.Duration{w.opts.ResyncInterval, w.opts.BackOffPeriod}); diff != "" {
				t.Errorf("(resync, back-off) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkersLatestUpdateWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fs := &fakeSync{SyncPodF: func(ctx context.Context, _ UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
			if pod.ResourceVersion == "1" {
				<-release
			}
			return false, nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		h.update(create(newPod("a")))
		h.update(upd(newPod("a", version("2"))))
		h.update(upd(newPod("a", version("3"))))
		h.wantCalls("SyncPod create a@1")

		close(release)
		synctest.Wait()
		h.wantCalls("SyncPod create a@1", "SyncPod update a@3")
	})
}

func TestWorkersOneGoroutinePerPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fs := &fakeSync{SyncPodF: func(ctx context.Context, _ UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
			<-release
			return false, nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		for _, uid := range []string{"a", "b", "c"} {
			h.update(create(newPod(uid)))
			h.update(upd(newPod(uid, version("2"))))
		}
		// Every pod's first sync is in flight at once: one goroutine each.
		got := fs.Calls()
		slices.Sort(got)
		if diff := cmp.Diff([]string{"SyncPod create a@1", "SyncPod create b@1", "SyncPod create c@1"}, got); diff != "" {
			t.Errorf("calls in flight (-want +got):\n%s", diff)
		}
		close(release)
		synctest.Wait()
		if len(fs.Calls()) != 6 {
			t.Errorf("calls = %q, want 6", fs.Calls())
		}
		if len(fs.overlap) != 0 {
			t.Errorf("pods with overlapping calls: %v, want none", fs.overlap)
		}
	})
}

// An idle pod holds no goroutine; its next update starts one, which still
// reads a status newer than the previous goroutine's last sync, and calls
// never overlap.
func TestWorkersIdlePodHasNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ends []time.Time
		fs := &fakeSync{SyncPodF: func(context.Context, UpdateType, *v1.Pod, *runtime.PodStatus) (bool, error) {
			time.Sleep(time.Second)
			mu.Lock()
			defer mu.Unlock()
			ends = append(ends, time.Now())
			return false, nil
		}}
		h := startHarness(t, fs)
		defer h.stop()
		running := func() bool {
			h.w.mu.Lock()
			defer h.w.mu.Unlock()
			return h.w.pods["a"].running
		}

		h.update(create(newPod("a")))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if running() {
			t.Fatal("the idle pod's goroutine still runs")
		}
		h.update(upd(newPod("a", version("2"))))
		h.update(upd(newPod("a", version("3"))))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if running() {
			t.Error("the idle pod's goroutine still runs after its second sync")
		}
		h.wantCalls("SyncPod create a@1", "SyncPod update a@2", "SyncPod update a@3")
		if len(fs.overlap) != 0 {
			t.Errorf("pods with overlapping calls: %v, want none", fs.overlap)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []cacheRead{{UID: "a"}, {UID: "a", MinTime: ends[0]}, {UID: "a", MinTime: ends[1]}}
		if diff := cmp.Diff(want, h.cache.Reads()); diff != "" {
			t.Errorf("cache reads (-want +got):\n%s", diff)
		}
	})
}

func TestWorkersReadStatusNewerThanLastSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ends []time.Time
		took := func() int {
			time.Sleep(3 * time.Second)
			mu.Lock()
			defer mu.Unlock()
			ends = append(ends, time.Now())
			return len(ends)
		}
		fs := &fakeSync{
			SyncPodF: func(context.Context, UpdateType, *v1.Pod, *runtime.PodStatus) (bool, error) {
				return took() == 2, nil
			},
			SyncTerminatingPodF: func(context.Context, *v1.Pod, *runtime.PodStatus, int64, func(*v1.PodStatus)) error {
				took()
				return nil
			},
			SyncTerminatedPodF: func(context.Context, *v1.Pod, *runtime.PodStatus) error {
				took()
				return nil
			},
		}
		h := startHarness(t, fs)
		defer h.stop()

		h.update(create(newPod("a")))
		h.update(upd(newPod("a", version("2"))))
		time.Sleep(time.Minute) // every sync takes 3s
		synctest.Wait()
		h.wantCalls("SyncPod create a@1", "SyncPod update a@2", "SyncTerminatingPod a@2 grace=30", "SyncTerminatedPod a@2")
		mu.Lock()
		defer mu.Unlock()
		if len(ends) != 4 {
			t.Fatalf("syncs ended: %d, want 4", len(ends))
		}
		want := []cacheRead{
			{UID: "a"},
			{UID: "a", MinTime: ends[0]},
			{UID: "a", MinTime: ends[1]},
			{UID: "a", MinTime: ends[2]},
		}
		if diff := cmp.Diff(want, h.cache.Reads()); diff != "" {
			t.Errorf("cache reads (-want +got):\n%s", diff)
		}
	})
}

func TestWorkersCacheErrorBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := startHarness(t, fs)
		defer h.stop()
		h.cache.mu.Lock()
		h.cache.err = errors.New("no status")
		h.cache.mu.Unlock()
		pod := newPod("a")
		h.update(create(pod))
		h.wantCalls()

		time.Sleep(15 * time.Second)
		h.cache.mu.Lock()
		h.cache.err = nil
		h.cache.mu.Unlock()
		h.syncLoop(pod)
		h.wantCalls("SyncPod sync a@1")
	})
}

func TestWorkersTerminationTriggers(t *testing.T) {
	tests := []struct {
		name string
		// status, when set, is the pod's runtime status in the cache.
		first  *v1.Pod
		then   UpdateOptions
		fsEdit func(*fakeSync)
		want   []string
		// wantTerminated is what Options.Terminated is told: "a" but
		// where said.
		wantTerminated []types.UID
	}{
		{
			name: "kill", first: newPod("a"), then: kill(newPod("a"), nil),
			want: []string{"SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1"},
		},
		{
			name: "deletion timestamp", first: newPod("a"), then: upd(newPod("a", version("2"), deleted(12))),
			want: []string{"SyncPod create a@1", "SyncTerminatingPod a@2 grace=12", "SyncTerminatedPod a@2"},
		},
		{
			name: "terminal phase in the pod status", first: newPod("a"), then: upd(newPod("a", version("2"), phase(v1.PodFailed))),
			want: []string{"SyncPod create a@1", "SyncTerminatingPod a@2 grace=30", "SyncTerminatedPod a@2"},
		},
		{
			name: "SyncPod reports terminal", first: newPod("a"),
			fsEdit: func(fs *fakeSync) {
				fs.SyncPodF = func(context.Context, UpdateType, *v1.Pod, *runtime.PodStatus) (bool, error) { return true, nil }
			},
			want: []string{"SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1"},
		},
		{
			name: "orphan kill of a known pod", first: newPod("a"), then: runtimeKill("a"),
			want: []string{"SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1"},
		},
		{
			name: "orphan kill of a pod known only from the runtime", then: runtimeKill("r"),
			want:           []string{"SyncTerminatingRuntimePod r"},
			wantTerminated: []types.UID{"r"},
		},
		{
			name: "terminal pod found stopped (agent restart): only cleanup", first: newPod("a", phase(v1.PodSucceeded)),
			want: []string{"SyncTerminatedPod a@1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := &fakeSync{}
				if tt.fsEdit != nil {
					tt.fsEdit(fs)
				}
				h := startHarness(t, fs)
				defer h.stop()
				if tt.first != nil {
					h.update(create(tt.first))
				}
				if tt.then.Pod != nil || tt.then.RunningPod != nil {
					h.update(tt.then)
				}
				h.wantCalls(tt.want...)
				want := tt.wantTerminated
				if want == nil {
					want = []types.UID{"a"}
				}
				h.wantTerminated(want...)
			})
		})
	}
}

// wantTerminated checks what Options.Terminated was told.
func (h *harness) wantTerminated(want ...types.UID) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if diff := cmp.Diff(want, h.terminated); diff != "" {
		h.t.Errorf("Terminated calls (-want +got):\n%s", diff)
	}
}

func TestWorkersKillCancelsSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var statusSeen v1.PodStatus
		fs := &fakeSync{
			SyncPodF: func(ctx context.Context, _ UpdateType, _ *v1.Pod, _ *runtime.PodStatus) (bool, error) {
				return false, blockUntilCancelled(ctx)
			},
			SyncTerminatingPodF: func(_ context.Context, _ *v1.Pod, _ *runtime.PodStatus, _ int64, fn func(*v1.PodStatus)) error {
				if fn != nil {
					fn(&statusSeen)
				}
				return nil
			},
		}
		h := startHarness(t, fs)
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		if h.w.IsPodTerminationRequested("a") || !h.w.CouldHaveRunningContainers("a") {
			t.Errorf("before the kill: termination requested or containers cannot run")
		}
		completed := make(chan struct{})
		h.update(kill(pod, &KillPodOptions{
			CompletedCh:                              completed,
			PodStatusFunc:                            func(st *v1.PodStatus) { st.Phase, st.Reason = v1.PodFailed, "Evicted" },
			PodTerminationGracePeriodSecondsOverride: ptr[int64](5),
		}))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=5", "SyncTerminatedPod a@1")
		select {
		case <-completed:
		default:
			t.Errorf("CompletedCh still open after the pod terminated")
		}
		if diff := cmp.Diff(v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted"}, statusSeen); diff != "" {
			t.Errorf("status edited by the PodStatusFunc passed to SyncTerminatingPod (-want +got):\n%s", diff)
		}
		if !h.w.IsPodKnownTerminated("a") || h.w.CouldHaveRunningContainers("a") || !h.w.ShouldPodRuntimeBeRemoved("a") || !h.w.ShouldPodContainersBeTerminating("a") {
			t.Errorf("after termination the queries do not say terminated")
		}
	})
}

func TestWorkersKillWhileWaitingForStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := newHarness(t, fs, logr.Discard())
		blocking := &blockingCache{fakeCache: h.cache, block: make(chan struct{})}
		h.w.opts.Cache = blocking
		h.start()
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		h.wantCalls()
		// The kill cancels the wait: SyncPod is never called.
		h.update(kill(pod, nil))
		h.wantCalls()
		blocking.unblock()
		synctest.Wait()
		h.wantCalls("SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1")
	})
}

// blockingCache blocks GetNewerThan until unblocked or ctx ends.
type blockingCache struct {
	*fakeCache
	once  sync.Once
	block chan struct{}
}

func (c *blockingCache) unblock() { c.once.Do(func() { close(c.block) }) }

func (c *blockingCache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*runtime.PodStatus, error) {
	select {
	case <-c.block:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.fakeCache.GetNewerThan(ctx, uid, minTime)
}

func TestWorkersTerminatingRetriedThroughQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := 1
		fs := &fakeSync{SyncTerminatingPodF: func(context.Context, *v1.Pod, *runtime.PodStatus, int64, func(*v1.PodStatus)) error {
			if failures > 0 {
				failures--
				return errors.New("runtime down")
			}
			return nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		h.queue.GetWork() // drop the resync
		h.update(kill(pod, nil))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30")
		if !h.w.IsPodTerminationRequested("a") || h.w.IsPodKnownTerminated("a") {
			t.Errorf("after a failed termination: want terminating, not terminated")
		}

		time.Sleep(10*time.Second - time.Millisecond)
		h.syncLoop(pod)
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30")

		time.Sleep(5 * time.Second)
		h.syncLoop(pod)
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1")
	})
}

func TestWorkersTerminatedRetriedThroughQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := 1
		fs := &fakeSync{SyncTerminatedPodF: func(context.Context, *v1.Pod, *runtime.PodStatus) error {
			if failures > 0 {
				failures--
				return errors.New("volume busy")
			}
			return nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		h.update(kill(pod, nil))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1")
		time.Sleep(15 * time.Second)
		h.syncLoop(pod)
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1", "SyncTerminatedPod a@1")
		h.update(upd(pod))
		if got := len(fs.Calls()); got != 4 {
			t.Errorf("calls after the worker finished = %d, want 4", got)
		}
	})
}

func TestWorkersGracePeriodShrinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{SyncTerminatingPodF: func(ctx context.Context, _ *v1.Pod, _ *runtime.PodStatus, grace int64, _ func(*v1.PodStatus)) error {
			if grace > 5 {
				return blockUntilCancelled(ctx)
			}
			return nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		h.update(kill(pod, &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](20)}))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=20")

		// A longer grace period is ignored: nothing is cancelled.
		h.update(kill(pod, &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr[int64](60)}))
		h.update(upd(newPod("a", version("2"), deleted(45))))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=20")

		// A shorter one cancels the termination in flight and restarts it.
		h.update(upd(newPod("a", version("3"), deleted(5))))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=20", "SyncTerminatingPod a@3 grace=5", "SyncTerminatedPod a@3")
	})
}

func TestWorkersUpdateWhileTerminating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fs := &fakeSync{SyncTerminatingPodF: func(context.Context, *v1.Pod, *runtime.PodStatus, int64, func(*v1.PodStatus)) error {
			<-release
			return nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		h.update(create(newPod("a")))
		h.update(kill(newPod("a"), nil))
		h.update(upd(newPod("a", version("2"))))
		h.update(create(newPod("a", version("3"))))
		h.update(upd(newPod("a", version("4"))))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30")
		close(release)
		synctest.Wait()
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@4")
	})
}

func TestWorkersStaticPodsStartSerially(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		releaseOld := make(chan struct{})
		fs := &fakeSync{SyncTerminatedPodF: func(_ context.Context, pod *v1.Pod, _ *runtime.PodStatus) error {
			if pod.UID == "old" {
				<-releaseOld
			}
			return nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		webOld := newPod("old", static, func(p *v1.Pod) { p.Name = "web" })
		webNew := newPod("new", static, func(p *v1.Pod) { p.Name = "web"; p.ResourceVersion = "2" })
		other := newPod("other", static)
		h.update(create(webOld))
		h.update(create(webNew))
		h.update(create(other))
		h.wantCalls("SyncPod create web@1", "SyncPod create other@1")
		if !h.w.CouldHaveRunningContainers("new") || h.w.IsPodTerminationRequested("new") {
			t.Errorf("waiting static pod: want known, not terminating")
		}

		// The manifest changed: the old UID is killed, the new one waits
		// until the old one finished.
		h.update(kill(webOld, nil))
		h.wantCalls("SyncPod create web@1", "SyncPod create other@1", "SyncTerminatingPod web@1 grace=30", "SyncTerminatedPod web@1")
		h.update(upd(webNew))
		if got := fs.CallsOf("web"); len(got) != 3 {
			t.Errorf("web calls while the old UID cleans up = %q, want no SyncPod of the new UID", got)
		}

		close(releaseOld)
		synctest.Wait()
		h.wantCalls("SyncPod create web@1", "SyncPod create other@1", "SyncTerminatingPod web@1 grace=30", "SyncTerminatedPod web@1", "SyncPod update web@2")
	})
}

func TestWorkersStaticPodKilledBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := startHarness(t, fs)
		defer h.stop()

		webOld := newPod("old", static, func(p *v1.Pod) { p.Name = "web" })
		webMid := newPod("mid", static, func(p *v1.Pod) { p.Name = "web"; p.ResourceVersion = "2" })
		webNew := newPod("new", static, func(p *v1.Pod) { p.Name = "web"; p.ResourceVersion = "3" })
		h.update(create(webOld))
		h.update(create(webMid))
		h.update(create(webNew))
		completed := make(chan struct{})
		h.update(kill(webMid, &KillPodOptions{CompletedCh: completed}))
		select {
		case <-completed:
		default:
			t.Errorf("kill of a static pod that never started: CompletedCh still open")
		}
		h.update(kill(webOld, nil))
		h.wantCalls("SyncPod create web@1", "SyncTerminatingPod web@1 grace=30", "SyncTerminatedPod web@1", "SyncPod create web@3")
		h.wantTerminated("mid", "old")
	})
}

func TestWorkersUIDReuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := startHarness(t, fs)
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		h.update(kill(pod, nil))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1")

		h.update(create(newPod("a", version("2"))))
		h.update(upd(newPod("a", version("2"))))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1")
		if got := h.w.SyncKnownPods(nil); len(got) != 0 {
			t.Errorf("SyncKnownPods after the pod finished = %v, want it forgotten", got)
		}
		if h.w.IsPodKnownTerminated("a") || h.w.CouldHaveRunningContainers("a") {
			t.Errorf("forgotten UID: want unknown and not running")
		}

		h.update(create(newPod("a", version("3"))))
		h.wantCalls("SyncPod create a@1", "SyncTerminatingPod a@1 grace=30", "SyncTerminatedPod a@1", "SyncPod create a@3")
	})
}

func TestWorkersRequeue(t *testing.T) {
	for _, tt := range []struct {
		name     string
		err      error
		min, max time.Duration
	}{
		{name: "success: resync interval", min: time.Minute, max: 90 * time.Second},
		{name: "error: back-off period", err: errors.New("boom"), min: 10 * time.Second, max: 15 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var logs []string
				logger := funcr.New(func(_, args string) {
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, args)
				}, funcr.Options{})
				fs := &fakeSync{SyncPodF: func(context.Context, UpdateType, *v1.Pod, *runtime.PodStatus) (bool, error) {
					return false, tt.err
				}}
				h := newHarness(t, fs, logger)
				h.start()
				defer h.stop()

				h.update(create(newPod("a")))
				time.Sleep(tt.min - time.Nanosecond)
				if got := h.queue.GetWork(); len(got) != 0 {
					t.Errorf("due before %v: %v", tt.min, got)
				}
				time.Sleep(tt.max - tt.min + time.Nanosecond)
				if diff := cmp.Diff([]types.UID{"a"}, h.queue.GetWork()); diff != "" {
					t.Errorf("due by %v (-want +got):\n%s", tt.max, diff)
				}

				mu.Lock()
				defer mu.Unlock()
				var errLogs []string
				for _, l := range logs {
					if strings.Contains(l, `"msg"="Pod sync failed"`) {
						errLogs = append(errLogs, l)
					}
				}
				switch {
				case tt.err == nil && len(errLogs) != 0:
					t.Errorf("error logged after a successful sync: %q", errLogs)
				case tt.err != nil && (len(errLogs) != 1 || !strings.Contains(errLogs[0], `"pod"="ns/a"`) || !strings.Contains(errLogs[0], `"podUID"="a"`) || !strings.Contains(errLogs[0], `"error"="boom"`)):
					t.Errorf("error logs = %q, want one with the pod, its UID and the error", errLogs)
				}
			})
		})
	}
}

func TestWorkersRunEndStopsWithoutKilling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{SyncPodF: func(ctx context.Context, _ UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
			if pod.UID == "busy" {
				return false, blockUntilCancelled(ctx)
			}
			return false, nil
		}}
		h := startHarness(t, fs)
		h.update(create(newPod("idle")))
		h.update(create(newPod("busy")))
		h.stop()
		synctest.Wait()

		got := fs.Calls()
		slices.Sort(got)
		if diff := cmp.Diff([]string{"SyncPod create busy@1", "SyncPod create idle@1"}, got); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		// After Run returned, updates are dropped.
		h.w.UpdatePod(kill(newPod("idle"), nil))
		h.w.UpdatePod(create(newPod("late")))
		synctest.Wait()
		if len(fs.Calls()) != 2 {
			t.Errorf("calls after Run returned: %q", fs.Calls()[2:])
		}
		if h.w.IsPodTerminationRequested("idle") {
			t.Errorf("kill after Run returned was recorded")
		}
	})
}

func TestWorkersUpdateBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := newHarness(t, fs, logr.Discard())
		h.w.UpdatePod(create(newPod("a")))
		h.w.UpdatePod(upd(newPod("a", version("2"))))
		synctest.Wait()
		h.wantCalls()
		if !h.w.CouldHaveRunningContainers("a") {
			t.Errorf("pod updated before Run: want known")
		}
		h.start()
		defer h.stop()
		h.wantCalls("SyncPod update a@2")
	})
}

func TestWorkersRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, &fakeSync{})
		defer h.stop()
		if err := h.w.Run(t.Context()); err == nil {
			t.Errorf("second Run = nil, want an error")
		}
	})
}

func TestWorkersSyncKnownPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{SyncPodF: func(ctx context.Context, _ UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
			if pod.UID == "orphan" {
				return false, blockUntilCancelled(ctx)
			}
			return false, nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		kept, orphan, done := newPod("kept"), newPod("orphan"), newPod("done")
		waiting := newPod("waiting", static, func(p *v1.Pod) { p.Name = "kept" })
		holder := newPod("holder", static, func(p *v1.Pod) { p.Name = "kept" })
		for _, p := range []*v1.Pod{kept, orphan, done, holder, waiting} {
			h.update(create(p))
		}
		h.update(kill(done, nil))

		got := h.w.SyncKnownPods([]*v1.Pod{kept, done, holder})
		want := map[types.UID]PodWorkerSync{
			"kept":   {State: SyncPod, HasConfig: true},
			"orphan": {State: TerminatingPod, Orphan: true, HasConfig: true},
			"done":   {State: TerminatedPod, HasConfig: true},
			"holder": {State: SyncPod, HasConfig: true, Static: true},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SyncKnownPods (-want +got):\n%s", diff)
		}
		synctest.Wait()
		if diff := cmp.Diff([]string{"SyncPod create orphan@1", "SyncTerminatingPod orphan@1 grace=30", "SyncTerminatedPod orphan@1"}, fs.CallsOf("orphan")); diff != "" {
			t.Errorf("orphan calls (-want +got):\n%s", diff)
		}
		if fs.CallsOf("waiting") != nil {
			t.Errorf("static pod forgotten before it started was synced: %q", fs.CallsOf("waiting"))
		}
		if !h.w.ShouldPodContentBeRemoved("orphan") {
			t.Errorf("orphan that terminated: content should be removed")
		}

		got = h.w.SyncKnownPods([]*v1.Pod{kept})
		want = map[types.UID]PodWorkerSync{
			"kept":   {State: SyncPod, HasConfig: true},
			"holder": {State: TerminatingPod, Orphan: true, HasConfig: true, Static: true},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("second SyncKnownPods (-want +got):\n%s", diff)
		}
		synctest.Wait()
		if got := h.w.SyncKnownPods([]*v1.Pod{kept}); len(got) != 1 {
			t.Errorf("third SyncKnownPods = %v, want only kept", got)
		}
	})
}

func TestWorkersRuntimePodForgottenAfterKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := startHarness(t, fs)
		defer h.stop()

		completed := make(chan struct{})
		opts := runtimeKill("r")
		opts.KillPodOptions = &KillPodOptions{CompletedCh: completed}
		h.update(opts)
		h.wantCalls("SyncTerminatingRuntimePod r")
		if reads := h.cache.Reads(); len(reads) != 0 {
			t.Errorf("status read for a pod known only from the runtime: %v", reads)
		}
		select {
		case <-completed:
		default:
			t.Errorf("CompletedCh open after the runtime pod stopped")
		}
		// Forgotten at once, without SyncKnownPods: if the runtime still
		// lists the pod, it is killed again.
		if h.w.IsPodKnownTerminated("r") || !h.w.CouldHaveRunningContainers("r") {
			t.Errorf("runtime pod after its kill: want unknown")
		}
		h.update(runtimeKill("r"))
		h.wantCalls("SyncTerminatingRuntimePod r", "SyncTerminatingRuntimePod r")
		if got := h.w.SyncKnownPods(nil); len(got) != 0 {
			t.Errorf("SyncKnownPods = %v, want the runtime pod forgotten", got)
		}
	})
}

func TestWorkersKillOfTerminatedPodAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fs := &fakeSync{SyncTerminatedPodF: func(context.Context, *v1.Pod, *runtime.PodStatus) error {
			<-release
			return nil
		}}
		h := startHarness(t, fs)
		defer h.stop()

		pod := newPod("a")
		h.update(create(pod))
		h.update(kill(pod, nil))
		for i := range 2 {
			if i == 1 {
				close(release) // now finished
				synctest.Wait()
			}
			completed := make(chan struct{})
			h.update(kill(pod, &KillPodOptions{CompletedCh: completed}))
			select {
			case <-completed:
			default:
				t.Errorf("kill %d of a terminated pod: CompletedCh still open", i)
			}
		}
	})
}

// TestWorkersOnSync: each sync function call is reported with the
// kubelet's operation name and how long it took (synctest time).
func TestWorkersOnSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{SyncPodF: func(ctx context.Context, _ UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
			time.Sleep(3 * time.Second)
			return false, nil
		}}
		h := newHarness(t, fs, logr.Discard())
		var mu sync.Mutex
		var got []string
		h.w.opts.OnSync = func(op string, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s %v", op, d))
		}
		h.start()
		defer h.stop()
		h.update(create(newPod("a")))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		h.update(UpdateOptions{UpdateType: SyncPodKill, Pod: newPod("a")})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{"create 3s", "kill 0s", "terminated 0s"}, got); diff != "" {
			t.Errorf("OnSync calls (-want +got):\n%s", diff)
		}
	})
}

// TestWorkersTerminations: the count grows when a pod's containers
// stopped, when its worker finished and when the UID is forgotten, and
// not with syncs, so that housekeeping and admission can tell cheaply
// whether a pod left the active pods.
func TestWorkersTerminations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, &fakeSync{})
		defer h.stop()
		want := func(what string, n uint64) {
			t.Helper()
			if got := h.w.Terminations(); got != n {
				t.Errorf("%s: Terminations() = %d, want %d", what, got, n)
			}
		}
		a := newPod("a")
		h.update(create(a))
		h.update(UpdateOptions{UpdateType: SyncPodSync, Pod: a})
		h.syncLoop(a)
		want("created and synced", 0)
		h.update(UpdateOptions{UpdateType: SyncPodKill, Pod: a})
		// Terminated, then finished (SyncTerminatedPod).
		want("killed", 2)
		h.w.SyncKnownPods(nil)
		want("forgotten", 3)
		h.w.SyncKnownPods(nil)
		want("nothing more to forget", 3)
	})
}

// TestWorkersTerminationsFailedKill: a failed step of a pod's termination
// counts, so that housekeeping, which retries the pods no longer in the
// config, does not skip its next pass.
func TestWorkersTerminationsFailedKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		fail.Store(true)
		h := startHarness(t, &fakeSync{SyncTerminatingPodF: func(context.Context, *v1.Pod, *runtime.PodStatus, int64, func(*v1.PodStatus)) error {
			if fail.Load() {
				return errors.New("StopPodSandbox: network teardown failed")
			}
			return nil
		}})
		defer h.stop()
		a := newPod("a")
		h.update(create(a))
		h.update(UpdateOptions{UpdateType: SyncPodKill, Pod: a})
		synctest.Wait()
		if got := h.w.Terminations(); got != 1 {
			t.Errorf("after a failed kill: Terminations() = %d, want 1", got)
		}
	})
}

// TestWorkersAggregateSyncErrors: a pod whose sync fails on every retry is
// logged once, then once a minute with the count of the failures not
// logged; another pod's failures are logged apart.
func TestWorkersAggregateSyncErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var logs []string
		logger := funcr.New(func(_, args string) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, args)
		}, funcr.Options{})
		fs := &fakeSync{SyncPodF: func(context.Context, UpdateType, *v1.Pod, *runtime.PodStatus) (bool, error) {
			return false, errors.New("boom")
		}}
		h := newHarness(t, fs, logger)
		h.start()
		defer h.stop()
		a, b := newPod("a"), newPod("b")
		h.update(create(a))
		h.update(create(b))
		// A sync of each pod every second for 150 s (as PLEG events
		// would ask), and housekeeping every 2 s.
		for i := range 150 {
			h.update(UpdateOptions{UpdateType: SyncPodSync, Pod: a})
			h.update(UpdateOptions{UpdateType: SyncPodSync, Pod: b})
			if i%2 == 0 {
				h.w.SyncKnownPods([]*v1.Pod{a, b})
			}
			time.Sleep(time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		perPod := map[string]int{}
		for _, l := range logs {
			if strings.Contains(l, `"msg"="Pod sync failed"`) {
				for _, uid := range []string{"a", "b"} {
					if strings.Contains(l, `"podUID"="`+uid+`"`) {
						perPod[uid]++
					}
				}
			}
		}
		if diff := cmp.Diff(map[string]int{"a": 3, "b": 3}, perPod); diff != "" {
			t.Errorf("lines per pod in 150 s of failing syncs (-want +got):\n%s", diff)
		}
	})
}

// TestWorkersForgottenPodLeavesQueue: once housekeeping forgets a pod's
// worker, the pod is no longer in the queue (a synced pod is due again
// in a minute: its UID stayed that long after the pod was gone).
func TestWorkersForgottenPodLeavesQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, &fakeSync{})
		defer h.stop()
		for _, name := range []string{"a", "b"} {
			h.update(create(newPod(name)))
		}
		if n := h.queue.Len(); n != 2 {
			t.Fatalf("%d pods in the queue after their syncs, want 2", n)
		}
		h.update(kill(newPod("a"), nil))
		h.w.SyncKnownPods([]*v1.Pod{newPod("b")})
		if diff := cmp.Diff([]types.UID{"b"}, queued(h.queue)); diff != "" {
			t.Errorf("queue after a's worker was forgotten (-want +got):\n%s", diff)
		}
		h.update(kill(newPod("b"), nil))
		h.w.SyncKnownPods(nil)
		if n := h.queue.Len(); n != 0 {
			t.Errorf("%d pods in the queue with none left, want 0", n)
		}
	})
}

// queued lists the pods in q.
func queued(q *Queue) []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []types.UID
	for _, e := range q.heap {
		out = append(out, e.uid)
	}
	slices.Sort(out)
	return out
}

// TestWorkersWakeEndsStatusWait: a sync waiting for a newer status than
// the worker's last (a cache not refreshed yet) stops waiting when the
// pod's wake-up comes and syncs on the status held, at the wake-up's time
// rather than at the next refresh of the cache: a pod's active deadline is
// acted on when it passes.
func TestWorkersWakeEndsStatusWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{}
		h := newHarness(t, fs, logr.Discard())
		blocking := &blockingCache{fakeCache: h.cache, block: make(chan struct{})}
		defer blocking.unblock()
		h.w.opts.Cache = blocking
		h.start()
		defer h.stop()

		pod := newPod("a")
		h.queue.Wake(pod.UID, 2*time.Second)
		start := time.Now()
		h.update(create(pod))
		h.wantCalls()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		h.wantCalls("SyncPod create a@1")
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("synced %v after the update, want at the wake-up, 2s", d)
		}
	})
}

// childCountingCtx is a context for Workers.Run that counts the contexts
// made from it that wait for it to end, and the most at once: a context
// from context.WithCancel keeps each such child in a map, which gives back
// none of the room it grew to once they end. Its Done channel is its own
// and its values are context.Background's, so the context package does
// not take it for one of its own and registers the children through its
// AfterFunc, where they can be counted.
type childCountingCtx struct {
	context.Context // context.Background(): no deadline, no value
	end             context.Context

	mu         sync.Mutex
	live, peak int
}

func newChildCountingCtx() (*childCountingCtx, context.CancelFunc) {
	end, cancel := context.WithCancel(context.Background())
	return &childCountingCtx{Context: context.Background(), end: end}, cancel
}

func (c *childCountingCtx) Done() <-chan struct{} { return c.end.Done() }
func (c *childCountingCtx) Err() error            { return c.end.Err() }

func (c *childCountingCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	c.live++
	c.peak = max(c.peak, c.live)
	c.mu.Unlock()
	stopF := context.AfterFunc(c.end, f)
	var once sync.Once
	return func() bool {
		once.Do(func() {
			c.mu.Lock()
			c.live--
			c.mu.Unlock()
		})
		return stopF()
	}
}

func (c *childCountingCtx) counts() (live, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live, c.peak
}

// Run's context holds one child at a time however many pods have a sync in
// flight: a churn of pods, each generation's syncs all in flight at once,
// then killed and forgotten, would otherwise grow the children map of the
// agent's context to every pod in flight, for as long as the agent runs.
func TestWorkersRunContextHoldsOneChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSync{SyncPodF: func(ctx context.Context, _ UpdateType, _ *v1.Pod, _ *runtime.PodStatus) (bool, error) {
			return false, blockUntilCancelled(ctx)
		}}
		h := newHarness(t, fs, logr.Discard())
		ctx, cancel := newChildCountingCtx()
		done := make(chan error, 1)
		go func() { done <- h.w.Run(ctx) }()
		synctest.Wait()

		const pods = 50
		for gen := range 3 {
			for i := range pods {
				h.w.UpdatePod(create(newPod(fmt.Sprintf("pod-%d-%d", gen, i))))
			}
			synctest.Wait()
			if got := len(fs.inFlightUIDs()); got != pods {
				t.Fatalf("generation %d: %d syncs in flight, want %d", gen, got, pods)
			}
			h.w.SyncKnownPods(nil) // every pod gone: killed
			synctest.Wait()
			h.w.SyncKnownPods(nil) // and forgotten
			if got := h.w.SyncKnownPods(nil); len(got) != 0 {
				t.Fatalf("generation %d: pods still known: %v", gen, got)
			}
		}
		if live, peak := ctx.counts(); live != 0 || peak != 1 {
			t.Errorf("children of Run's context: %d left, at most %d at once; want 0 left, at most 1", live, peak)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
