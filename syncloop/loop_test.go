package syncloop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/sources"
)

// recorder is a SyncHandler that records each call as "Method:uid,uid".
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(method string, pods []*v1.Pod) {
	s := method + ":"
	for i, p := range pods {
		if i > 0 {
			s += ","
		}
		s += string(p.UID)
	}
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *recorder) HandlePodAdditions(_ context.Context, p []*v1.Pod) { r.add("Add", p) }
func (r *recorder) HandlePodUpdates(_ context.Context, p []*v1.Pod)   { r.add("Update", p) }
func (r *recorder) HandlePodRemoves(_ context.Context, p []*v1.Pod)   { r.add("Remove", p) }
func (r *recorder) HandlePodReconcile(_ context.Context, p []*v1.Pod) { r.add("Reconcile", p) }
func (r *recorder) HandlePodSyncs(_ context.Context, p []*v1.Pod)     { r.add("Sync", p) }
func (r *recorder) HandlePodCleanups(context.Context) error           { r.add("Cleanup", nil); return nil }

type podMap map[types.UID]*v1.Pod

func (m podMap) GetPodByUID(uid types.UID) (*v1.Pod, bool) { p, ok := m[uid]; return p, ok }

type queue struct {
	mu   sync.Mutex
	uids []types.UID
}

func (q *queue) GetWork() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.uids
	q.uids = nil
	return u
}

func pod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid}}
}

func TestLoopDispatch(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		updates := make(chan sources.PodUpdate)
		events := make(chan *pleg.Event)
		live, ready, startup := make(chan probe.Update), make(chan probe.Update), make(chan probe.Update)
		extra := make(chan []types.UID)
		sourcesReady := false
		var srMu sync.Mutex
		q := &queue{}
		pods := podMap{"a": pod("a"), "b": pod("b")}
		h := &recorder{}
		l, err := New(h, Config{
			Updates: updates, PLEG: events, Liveness: live, Readiness: ready, Startup: startup,
			Extra: []Channel{{Name: "mine", C: extra}},
			Pods:  pods, Work: q,
			SourcesReady: func() bool { srMu.Lock(); defer srMu.Unlock(); return sourcesReady },
			SyncPeriod:   time.Second, HousekeepingPeriod: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()

		step := func(name string, send func(), want []string) {
			t.Helper()
			send()
			synctest.Wait()
			if diff := cmp.Diff(want, h.take()); diff != "" {
				t.Errorf("%s: calls (-want +got):\n%s", name, diff)
			}
		}
		step("add", func() { updates <- sources.PodUpdate{Op: sources.Add, Pods: []*v1.Pod{pods["a"]}} }, []string{"Add:a"})
		step("update", func() { updates <- sources.PodUpdate{Op: sources.Update, Pods: []*v1.Pod{pods["a"]}} }, []string{"Update:a"})
		step("delete is an update", func() { updates <- sources.PodUpdate{Op: sources.Delete, Pods: []*v1.Pod{pods["b"]}} }, []string{"Update:b"})
		step("remove", func() { updates <- sources.PodUpdate{Op: sources.Remove, Pods: []*v1.Pod{pods["b"]}} }, []string{"Remove:b"})
		step("reconcile", func() { updates <- sources.PodUpdate{Op: sources.Reconcile, Pods: []*v1.Pod{pods["a"]}} }, []string{"Reconcile:a"})
		step("pleg died", func() { events <- &pleg.Event{ID: "a", Type: pleg.ContainerDied} }, []string{"Sync:a"})
		step("pleg removed is not synced", func() { events <- &pleg.Event{ID: "a", Type: pleg.ContainerRemoved} }, nil)
		step("pleg unknown pod", func() { events <- &pleg.Event{ID: "zz", Type: pleg.ContainerStarted} }, nil)
		step("liveness success ignored", func() { live <- probe.Update{PodUID: "a", Result: probe.Success} }, nil)
		step("liveness failure", func() { live <- probe.Update{PodUID: "a", Result: probe.Failure} }, []string{"Sync:a"})
		step("readiness", func() { ready <- probe.Update{PodUID: "b", Result: probe.Success} }, []string{"Sync:b"})
		step("startup", func() { startup <- probe.Update{PodUID: "b", Result: probe.Failure} }, []string{"Sync:b"})
		step("extra", func() { extra <- []types.UID{"a", "zz", "b"} }, []string{"Sync:a,b"})

		// The sync tick picks up due work; housekeeping waits for sources.
		q.mu.Lock()
		q.uids = []types.UID{"b"}
		q.mu.Unlock()
		step("tick 1s", func() { time.Sleep(time.Second) }, []string{"Sync:b"})
		step("tick 2s, sources not ready", func() { time.Sleep(time.Second) }, nil)
		srMu.Lock()
		sourcesReady = true
		srMu.Unlock()
		step("tick 4s, housekeeping", func() { time.Sleep(2 * time.Second) }, []string{"Cleanup:"})

		if err := l.Healthy(); err != nil {
			t.Errorf("Healthy() = %v, want nil", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		if err := l.Healthy(); !errors.Is(err, ErrNotHealthy) {
			t.Errorf("Healthy() after stop = %v, want ErrNotHealthy", err)
		}
	})
}

func TestLoopRuntimeUnhealthyBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		checks := []time.Time{}
		healthyAfter := 7
		h := &recorder{}
		updates := make(chan sources.PodUpdate, 1)
		l, err := New(h, Config{
			Updates: updates,
			Pods:    podMap{},
			RuntimeHealthy: func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				checks = append(checks, time.Now())
				if len(checks) < healthyAfter {
					return errors.New("runtime down")
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()
		updates <- sources.PodUpdate{Op: sources.Add, Pods: []*v1.Pod{pod("a")}}
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		var gaps []time.Duration
		for i := 1; i < healthyAfter; i++ {
			gaps = append(gaps, checks[i].Sub(checks[i-1]))
		}
		want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("back-off between health checks (-want +got):\n%s", diff)
		}
		var adds int
		for _, c := range h.take() {
			if c == "Add:a" {
				adds++
			}
		}
		if adds != 1 {
			t.Errorf("Add:a handled %d times, want once, after the runtime became healthy", adds)
		}
		if first := checks[healthyAfter-1].Sub(start); first != 6300*time.Millisecond {
			t.Errorf("healthy after %v, want 6.3s", first)
		}
	})
}

func TestLoopHealthyThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		h := &blockingHandler{recorder: &recorder{}, block: block}
		updates := make(chan sources.PodUpdate, 1)
		l, err := New(h, Config{Updates: updates, Pods: podMap{}, HealthyThreshold: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()
		synctest.Wait()
		if err := l.Healthy(); err != nil {
			t.Fatalf("Healthy() = %v, want nil", err)
		}
		updates <- sources.PodUpdate{Op: sources.Add}
		time.Sleep(2 * time.Minute) // the handler is stuck
		if err := l.Healthy(); !errors.Is(err, ErrNotHealthy) {
			t.Errorf("Healthy() with a stuck handler = %v, want ErrNotHealthy", err)
		}
		close(block)
		synctest.Wait()
		if err := l.Healthy(); err != nil {
			t.Errorf("Healthy() after the handler returned = %v, want nil", err)
		}
		cancel()
		<-done
	})
}

type blockingHandler struct {
	*recorder
	block chan struct{}
}

func (b *blockingHandler) HandlePodAdditions(context.Context, []*v1.Pod) { <-b.block }

func TestNewValidates(t *testing.T) {
	if _, err := New(nil, Config{Pods: podMap{}}); err == nil {
		t.Error("New(nil handler) = nil error")
	}
	if _, err := New(&recorder{}, Config{}); err == nil {
		t.Error("New without Pods = nil error")
	}
	if _, err := New(&recorder{}, Config{Pods: podMap{}, Extra: []Channel{{Name: "x"}}}); err == nil {
		t.Error("New with a nil extra channel = nil error")
	}
}

// slowCleanups is a recorder whose housekeeping passes take a while.
type slowCleanups struct {
	recorder
	pass time.Duration
}

func (s *slowCleanups) HandlePodCleanups(context.Context) error {
	s.add("Cleanup", nil)
	time.Sleep(s.pass)
	return nil
}

// TestLoopHousekeepingRests checks that a long housekeeping pass is
// followed by a rest of 9 times its duration, up to one housekeeping
// period (one tick skipped, never more), and that short passes run at
// every tick.
func TestLoopHousekeepingRests(t *testing.T) {
	for _, tc := range []struct {
		name string
		pass time.Duration
		want int // passes within 20 s of 2 s ticks
	}{
		// Passes at 2, 4, ..., 20 s.
		{"short passes", 100 * time.Millisecond, 10},
		// A pass at 2 s ends at 3 s and rests until 5 s (not 12 s: one
		// period at most): the next at 6 s, then 10, 14 and 18 s.
		{"long passes", time.Second, 5},
		// A pass at 2 s ends at 2.3 s and rests until 5 s: the next at
		// 6 s, then 10, 14 and 18 s.
		{"passes of 300ms", 300 * time.Millisecond, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &slowCleanups{pass: tc.pass}
				l, err := New(h, Config{Pods: podMap{}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- l.Run(ctx) }()
				time.Sleep(20*time.Second + time.Millisecond)
				synctest.Wait()
				if got := len(h.take()); got != tc.want {
					t.Errorf("%d housekeeping passes in 20 s, want %d", got, tc.want)
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// failingCleanups is a recorder whose housekeeping passes fail.
type failingCleanups struct{ recorder }

func (f *failingCleanups) HandlePodCleanups(context.Context) error {
	f.add("Cleanup", nil)
	return errors.New("mirror: listing the pods of node: connection refused")
}

// countLines is a logger that counts the lines that contain a string.
type countLines struct {
	mu    sync.Mutex
	lines []string
}

func (c *countLines) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.lines = append(c.lines, args)
	}, funcr.Options{})
}

func (c *countLines) count(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// TestLoopAggregatesErrorLines: a housekeeping that fails on every pass and
// a runtime that stays unhealthy are logged once, then once a minute with
// the count of the lines not logged, rather than once per pass.
func TestLoopAggregatesErrorLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &countLines{}
		h := &failingCleanups{}
		var down sync.Mutex
		downFor := time.Time{}
		l, err := New(h, Config{Pods: podMap{}, Logger: logs.logger(), RuntimeHealthy: func(context.Context) error {
			down.Lock()
			defer down.Unlock()
			if time.Now().Before(downFor) {
				return errors.New("runtime down")
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		// 150 s: 75 failed passes.
		time.Sleep(150 * time.Second)
		synctest.Wait()
		if n := len(h.take()); n < 70 {
			t.Fatalf("%d housekeeping passes, want 75", n)
		}
		if n := logs.count("Housekeeping failed"); n != 3 {
			t.Errorf("%d lines of the failed housekeeping in 75 passes, want 3 (at 0, 60 and 120 s)", n)
		}
		if n := logs.count(`"suppressed"=29`); n != 2 {
			t.Errorf("%d lines carry the count of the 29 passes not logged, want 2", n)
		}
		// A runtime down for 3 minutes: checked every 5 s once backed off.
		down.Lock()
		downFor = time.Now().Add(3 * time.Minute)
		down.Unlock()
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if n := logs.count("Runtime not healthy"); n > 4 {
			t.Errorf("%d lines of the unhealthy runtime in 3 minutes, want at most 4", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// wokenQueue is a queue that can wake the loop between ticks.
type wokenQueue struct {
	queue
	woken chan struct{}
}

func (q *wokenQueue) Woken() <-chan struct{} { return q.woken }

// TestLoopWokenQueue: a queue that signals Woken has its due work synced
// at once, not at the next tick.
func TestLoopWokenQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &wokenQueue{woken: make(chan struct{}, 1)}
		h := &recorder{}
		l, err := New(h, Config{Pods: podMap{"a": pod("a")}, Work: q, SyncPeriod: time.Hour, HousekeepingPeriod: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()
		time.Sleep(1300 * time.Millisecond)
		q.mu.Lock()
		q.uids = []types.UID{"a"}
		q.mu.Unlock()
		start := time.Now()
		q.woken <- struct{}{}
		synctest.Wait()
		if got := h.take(); !cmp.Equal(got, []string{"Sync:a"}) || time.Since(start) != 0 {
			t.Errorf("after Woken: calls %v after %v, want Sync:a at once", got, time.Since(start))
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// dueQueue is a WorkQueue with DueQueue: pods due at times, GetWork
// counted.
type dueQueue struct {
	mu      sync.Mutex
	due     map[types.UID]time.Time
	gets    int
	earlier chan struct{}
}

func (q *dueQueue) GetWork() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gets++
	var out []types.UID
	for uid, at := range q.due {
		if !at.After(time.Now()) {
			out = append(out, uid)
			delete(q.due, uid)
		}
	}
	return out
}

func (q *dueQueue) NextDue() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var next time.Time
	for _, at := range q.due {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

func (q *dueQueue) Earlier() <-chan struct{} { return q.earlier }

func (q *dueQueue) enqueue(uid types.UID, delay time.Duration) {
	q.mu.Lock()
	q.due[uid] = time.Now().Add(delay)
	q.mu.Unlock()
	select {
	case q.earlier <- struct{}{}:
	default:
	}
}

// TestLoopDueQueue: with a queue that tells when its earliest pod is due,
// the loop takes the work at the first sync tick at or after that time,
// as polling every tick would, and does not wake at the ticks when no pod
// is due.
func TestLoopDueQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &dueQueue{due: map[types.UID]time.Time{}, earlier: make(chan struct{}, 1)}
		h := &recorder{}
		l, err := New(h, Config{Pods: podMap{"a": pod("a"), "b": pod("b")}, Work: q, HousekeepingPeriod: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		start := time.Now()
		go func() { done <- l.Run(ctx) }()
		time.Sleep(10300 * time.Millisecond)
		synctest.Wait()
		q.mu.Lock()
		gets := q.gets
		q.mu.Unlock()
		if gets != 0 {
			t.Errorf("%d GetWork calls in 10s with no pod queued, want 0", gets)
		}
		// Due at 12.5s: taken at the tick of 13s.
		q.enqueue("a", 2200*time.Millisecond)
		var at []time.Duration
		for range 30 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if got := h.take(); len(got) > 0 {
				at = append(at, time.Since(start))
				if !cmp.Equal(got, []string{"Sync:a"}) {
					t.Errorf("calls %v, want Sync:a", got)
				}
			}
		}
		// Due at once (13.3s): taken at the tick of 14s.
		q.enqueue("b", 0)
		for range 10 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if got := h.take(); len(got) > 0 {
				at = append(at, time.Since(start))
				if !cmp.Equal(got, []string{"Sync:b"}) {
					t.Errorf("calls %v, want Sync:b", got)
				}
			}
		}
		if want := []time.Duration{13 * time.Second, 14 * time.Second}; !cmp.Equal(at, want) {
			t.Errorf("synced at %v, want %v", at, want)
		}
		q.mu.Lock()
		gets = q.gets
		q.mu.Unlock()
		if gets != 2 {
			t.Errorf("%d GetWork calls, want 2", gets)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// timedCleanups records when each housekeeping pass began, as offsets
// from start.
type timedCleanups struct {
	recorder
	start time.Time
	pass  time.Duration
	at    []time.Duration
}

func (c *timedCleanups) HandlePodCleanups(context.Context) error {
	c.mu.Lock()
	c.at = append(c.at, time.Since(c.start))
	c.mu.Unlock()
	time.Sleep(c.pass)
	return nil
}

func (c *timedCleanups) passes() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at)
}

// TestLoopHousekeepingDue checks that a pass HousekeepingDue asks for runs
// before the next tick: at once when a quarter period passed since the
// last pass began, else when it has, and after the rest of a long pass;
// and that a tick that comes first takes its place.
func TestLoopHousekeepingDue(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name string
		pass time.Duration
		due  []time.Duration // when HousekeepingDue is signalled
		want []time.Duration // passes up to 5 s
	}{
		{"none", 0, nil, []time.Duration{2000 * ms, 4000 * ms}},
		// A quarter period (500 ms) after the pass at 2 s.
		{"soon after a pass", 0, []time.Duration{2100 * ms}, []time.Duration{2000 * ms, 2500 * ms, 4000 * ms}},
		{"long after a pass", 0, []time.Duration{3000 * ms}, []time.Duration{2000 * ms, 3000 * ms, 4000 * ms}},
		{"before the first pass", 0, []time.Duration{100 * ms}, []time.Duration{100 * ms, 2000 * ms, 4000 * ms}},
		// Several asks before it runs make one pass.
		{"coalesced", 0, []time.Duration{2100 * ms, 2200 * ms, 2300 * ms}, []time.Duration{2000 * ms, 2500 * ms, 4000 * ms}},
		// A pass of 100 ms rests 900 ms: the asked pass at 3 s.
		{"after the rest", 100 * ms, []time.Duration{2200 * ms}, []time.Duration{2000 * ms, 3000 * ms, 4000 * ms}},
		// Asked at 3.9 s, a pass at once; asked again at 3.95 s, it
		// would run at 4.4 s, but the tick's pass at 4 s takes its place.
		{"tick first", 0, []time.Duration{3900 * ms, 3950 * ms}, []time.Duration{2000 * ms, 3900 * ms, 4000 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &timedCleanups{start: time.Now(), pass: tc.pass}
				due := make(chan struct{}, 1)
				l, err := New(h, Config{Pods: podMap{}, HousekeepingDue: due})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- l.Run(ctx) }()
				for _, at := range tc.due {
					time.Sleep(time.Until(h.start.Add(at)))
					select {
					case due <- struct{}{}:
					default:
					}
					synctest.Wait()
				}
				time.Sleep(time.Until(h.start.Add(5 * time.Second)))
				synctest.Wait()
				if diff := cmp.Diff(tc.want, h.passes()); diff != "" {
					t.Errorf("housekeeping passes (-want +got):\n%s", diff)
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// settledCleanups is a HousekeepingSettler whose passes settle once
// work is false.
type settledCleanups struct {
	timedCleanups
	work bool
}

func (c *settledCleanups) HousekeepingSettled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.work
}

func (c *settledCleanups) setWork(w bool) {
	c.mu.Lock()
	c.work = w
	c.mu.Unlock()
}

// TestLoopHousekeepingSettled checks that an idle loop whose handler says
// housekeeping has nothing to do wakes only once per
// HousekeepingIdlePeriod, that any message brings the 2 s ticks back from
// that message on, and that a pass at an idle tick that leaves work
// brings them back too; a handler that cannot tell keeps the ticks.
func TestLoopHousekeepingSettled(t *testing.T) {
	const s = time.Second
	synctest.Test(t, func(t *testing.T) {
		h := &settledCleanups{timedCleanups: timedCleanups{start: time.Now()}}
		updates := make(chan sources.PodUpdate)
		l, err := New(h, Config{Pods: podMap{}, Updates: updates, SourcesReady: func() bool { return true }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		at := func(d time.Duration) {
			time.Sleep(time.Until(h.start.Add(d)))
			synctest.Wait()
		}
		// Settled after the first tick: ten minutes of idle make ten
		// passes more, not 300.
		at(10*time.Minute + 3*s)
		want := []time.Duration{2 * s}
		for i := 1; i <= 10; i++ {
			want = append(want, 2*s+time.Duration(i)*time.Minute)
		}
		if diff := cmp.Diff(want, h.passes()); diff != "" {
			t.Fatalf("idle passes (-want +got):\n%s", diff)
		}
		// A message: ticks every 2 s from it until a pass settles.
		h.setWork(true)
		updates <- sources.PodUpdate{Op: sources.Add}
		synctest.Wait()
		at(10*time.Minute + 8*s)
		h.setWork(false)
		at(10*time.Minute + 14*s)
		want = append(want, 10*time.Minute+5*s, 10*time.Minute+7*s, 10*time.Minute+9*s)
		if diff := cmp.Diff(want, h.passes()); diff != "" {
			t.Fatalf("passes after a message (-want +got):\n%s", diff)
		}
		// Work appears out of the loop's sight: the idle tick's pass sees
		// it and the 2 s ticks come back.
		h.setWork(true)
		at(11*time.Minute + 14*s)
		want = append(want, 11*time.Minute+9*s, 11*time.Minute+11*s, 11*time.Minute+13*s)
		if diff := cmp.Diff(want, h.passes()); diff != "" {
			t.Fatalf("passes after an idle tick found work (-want +got):\n%s", diff)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	// Without the capability, every 2 s.
	synctest.Test(t, func(t *testing.T) {
		h := &timedCleanups{start: time.Now()}
		l, err := New(h, Config{Pods: podMap{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		time.Sleep(time.Minute + s)
		synctest.Wait()
		if n := len(h.passes()); n != 30 {
			t.Errorf("%d passes in a minute, want 30", n)
		}
		cancel()
		<-done
	})
}
