package pleg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podruntime"

	"github.com/nodekit/nodekit/runtime"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func statusNamed(uid types.UID, name string) *runtime.PodStatus {
	return &runtime.PodStatus{ID: uid, Name: name}
}

func TestCacheGet(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		ops     func(c *StatusCache)
		want    *runtime.PodStatus
		wantErr error
	}{
		{"unknown pod", func(c *StatusCache) {}, &runtime.PodStatus{ID: "p"}, nil},
		{"set", func(c *StatusCache) { c.Set("p", statusNamed("p", "a"), nil, at(1)) }, statusNamed("p", "a"), nil},
		{"newer set wins", func(c *StatusCache) {
			c.Set("p", statusNamed("p", "a"), nil, at(1))
			c.Set("p", statusNamed("p", "b"), nil, at(2))
		}, statusNamed("p", "b"), nil},
		{"older set ignored", func(c *StatusCache) {
			c.Set("p", statusNamed("p", "b"), nil, at(2))
			c.Set("p", statusNamed("p", "a"), nil, at(1))
		}, statusNamed("p", "b"), nil},
		{"same time replaces", func(c *StatusCache) {
			c.Set("p", statusNamed("p", "a"), nil, at(2))
			c.Set("p", statusNamed("p", "b"), nil, at(2))
		}, statusNamed("p", "b"), nil},
		{"error kept with status", func(c *StatusCache) { c.Set("p", statusNamed("p", "a"), boom, at(1)) }, statusNamed("p", "a"), boom},
		{"nil status", func(c *StatusCache) { c.Set("p", nil, boom, at(1)) }, &runtime.PodStatus{ID: "p"}, boom},
		{"deleted", func(c *StatusCache) {
			c.Set("p", statusNamed("p", "a"), nil, at(1))
			c.Delete("p")
		}, &runtime.PodStatus{ID: "p"}, nil},
		{"older set after delete", func(c *StatusCache) {
			c.Set("p", statusNamed("p", "a"), nil, at(2))
			c.Delete("p")
			c.Set("p", statusNamed("p", "b"), nil, at(1))
		}, statusNamed("p", "b"), nil},
		{"other pod", func(c *StatusCache) { c.Set("q", statusNamed("q", "a"), nil, at(1)) }, &runtime.PodStatus{ID: "p"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.ops(c)
			got, err := c.Get("p")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Get error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestCacheGetNewerThanAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		ops     func(c *StatusCache)
		minTime time.Time
		want    *runtime.PodStatus // nil: must block
	}{
		{"entry newer", func(c *StatusCache) { c.Set("p", statusNamed("p", "a"), nil, at(2)) }, at(1), statusNamed("p", "a")},
		{"entry as old", func(c *StatusCache) { c.Set("p", statusNamed("p", "a"), nil, at(1)) }, at(1), nil},
		{"entry older, cache refreshed after", func(c *StatusCache) {
			c.Set("p", statusNamed("p", "a"), nil, at(1))
			c.UpdateTime(at(3))
		}, at(2), statusNamed("p", "a")},
		{"no entry, cache refreshed after", func(c *StatusCache) { c.UpdateTime(at(3)) }, at(2), &runtime.PodStatus{ID: "p"}},
		{"no entry, cache refreshed before", func(c *StatusCache) { c.UpdateTime(at(1)) }, at(2), nil},
		{"refresh goes forward only", func(c *StatusCache) {
			c.UpdateTime(at(3))
			c.UpdateTime(at(1))
		}, at(2), &runtime.PodStatus{ID: "p"}},
		{"empty cache", func(c *StatusCache) {}, time.Time{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.ops(c)
			ctx, cancel := context.WithCancel(t.Context())
			if tt.want == nil {
				cancel()
			}
			defer cancel()
			got, err := c.GetNewerThan(ctx, "p", tt.minTime)
			if tt.want == nil {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("GetNewerThan = %v, %v; want it to wait", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GetNewerThan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheGetNewerThanWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		c.Set("p", statusNamed("p", "old"), nil, at(1))

		type result struct {
			status *runtime.PodStatus
			err    error
		}
		wait := func(uid types.UID, minTime time.Time) chan result {
			ch := make(chan result, 1)
			go func() {
				s, err := c.GetNewerThan(t.Context(), uid, minTime)
				ch <- result{s, err}
			}()
			return ch
		}
		byPod := wait("p", at(1))
		byRefresh := wait("q", at(1))
		later := wait("p", at(5))
		synctest.Wait()
		for _, ch := range []chan result{byPod, byRefresh, later} {
			if len(ch) != 0 {
				t.Fatal("GetNewerThan returned before a newer status")
			}
		}

		c.Set("p", statusNamed("p", "stale"), nil, at(0)) // ignored: no wake-up
		c.Set("q", statusNamed("q", "as old"), nil, at(1))
		synctest.Wait()
		if len(byPod) != 0 || len(byRefresh) != 0 {
			t.Fatal("GetNewerThan returned on a status that is not newer")
		}
		c.Set("p", statusNamed("p", "new"), nil, at(2))
		synctest.Wait()
		if r := <-byPod; r.err != nil || r.status.Name != "new" {
			t.Errorf("waiter on p got %v, %v; want the new status", r.status, r.err)
		}
		if len(byRefresh) != 0 || len(later) != 0 {
			t.Fatal("a Set of p woke other waiters")
		}
		c.UpdateTime(at(3))
		synctest.Wait()
		if r := <-byRefresh; r.err != nil || r.status.Name != "as old" {
			t.Errorf("waiter on q got %v, %v; want its entry after the refresh", r.status, r.err)
		}
		if len(later) != 0 {
			t.Fatal("a refresh older than minTime woke a waiter")
		}
		c.UpdateTime(at(6))
		synctest.Wait()
		if r := <-later; r.err != nil || r.status.Name != "new" {
			t.Errorf("late waiter got %v, %v", r.status, r.err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.waiters) != 0 {
			t.Errorf("%d pods still have waiters", len(c.waiters))
		}
	})
}

func TestCacheWaiterRemovedWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := c.GetNewerThan(ctx, "p", at(1)); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("GetNewerThan = %v, want DeadlineExceeded", err)
				}
			})
		}
		synctest.Wait()
		c.mu.Lock()
		if got := len(c.waiters["p"]); got != 10 {
			t.Errorf("%d waiters, want 10", got)
		}
		c.mu.Unlock()
		wg.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.waiters) != 0 {
			t.Errorf("waiters left after their contexts ended: %v", c.waiters)
		}
	})
}

// A burst of waiters for many pods leaves no map behind once they are
// served: a map keeps the room it grew to.
func TestCacheWaitersMapDroppedWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		var wg sync.WaitGroup
		for i := range 100 {
			uid := types.UID(fmt.Sprint("p", i))
			wg.Go(func() {
				if _, err := c.GetNewerThan(t.Context(), uid, at(1)); err != nil {
					t.Errorf("GetNewerThan(%s) = %v", uid, err)
				}
			})
		}
		synctest.Wait()
		for i := range 100 {
			uid := types.UID(fmt.Sprint("p", i))
			c.Set(uid, &runtime.PodStatus{ID: uid}, nil, at(2))
		}
		wg.Wait()
		c.mu.Lock()
		if c.waiters != nil {
			t.Errorf("waiters = %v after every waiter was served, want the map dropped", c.waiters)
		}
		c.mu.Unlock()
		// The cache still takes waiters.
		wg.Go(func() {
			if _, err := c.GetNewerThan(t.Context(), "p0", at(3)); err != nil {
				t.Errorf("GetNewerThan after the drop = %v", err)
			}
		})
		synctest.Wait()
		c.mu.Lock()
		if got := len(c.waiters["p0"]); got != 1 {
			t.Errorf("%d waiters for p0 after the drop, want 1", got)
		}
		c.mu.Unlock()
		c.Set("p0", &runtime.PodStatus{ID: "p0"}, nil, at(4))
		wg.Wait()
	})
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache()
	var wg sync.WaitGroup
	uids := []types.UID{"a", "b", "c"}
	for i := range 4 {
		wg.Go(func() {
			for j := range 500 {
				uid := uids[j%len(uids)]
				c.Set(uid, statusNamed(uid, "x"), nil, at(j))
				if j%10 == 0 {
					c.UpdateTime(at(j))
				}
				if i == 0 && j%50 == 0 {
					c.Delete(uid)
				}
			}
		})
		wg.Go(func() {
			for j := range 200 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
				_, _ = c.GetNewerThan(ctx, uids[j%len(uids)], at(j))
				_, _ = c.Get(uids[j%len(uids)])
				cancel()
			}
		})
	}
	wg.Wait()
}

// TestCachePodsMatchRuntime: after a relist, the cache lists the runtime's
// pods as podruntime.Manager.GetPods does (every container and sandbox, the
// newest first); it refuses while it holds a failed read or was not
// refreshed since the time asked.
func TestCachePodsMatchRuntime(t *testing.T) {
	f := newFixture(t, nil, GenericOptions{})
	rt := f.rt
	mgr, err := podruntime.New(rt, rt, podruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.g, err = NewGeneric(rt, mgr, f.cache, GenericOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := f.runSandbox("a")
	f.createContainer("a", old, "app", true, "exit", "1")
	if err := rt.StopPodSandbox(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	sb := f.runSandbox("a")
	f.createContainer("a", sb, "app", true, "sleep", "infinity")
	f.createContainer("a", sb, "init", true, "exit", "0")
	sb2 := f.runSandbox("b")
	f.createContainer("b", sb2, "app", false)
	gone := f.runSandbox("c")
	f.relist()
	if err := rt.StopPodSandbox(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemovePodSandbox(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.relist()

	want, err := mgr.GetPods(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := f.cache.Pods(start)
	if !ok {
		t.Fatal("Pods refused after a relist")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cache's pods differ from the runtime's (-runtime +cache):\n%s", diff)
	}
	if _, ok := f.cache.Pods(time.Now().Add(time.Hour)); ok {
		t.Error("Pods answered for a time after the last refresh")
	}
	f.cache.Set("b", nil, errors.New("cannot read"), time.Now())
	if _, ok := f.cache.Pods(start); ok {
		t.Error("Pods answered while a pod's read failed")
	}
}

// TestCacheChanges: the count grows with every entry set or deleted, and
// the cache answers from itself only while refreshed since the time asked
// and without a failed read.
func TestCacheChanges(t *testing.T) {
	c := NewCache()
	want := func(what string, since time.Time, n uint64, ok bool) {
		t.Helper()
		gotN, gotOK := c.Changes(since)
		if gotN != n || gotOK != ok {
			t.Errorf("%s: Changes = %d, %v; want %d, %v", what, gotN, gotOK, n, ok)
		}
		if _, podsOK := c.Pods(since); podsOK != ok {
			t.Errorf("%s: Pods answers %v, Changes %v", what, podsOK, ok)
		}
		if _, runOK := c.RunningContainers(since); runOK != ok {
			t.Errorf("%s: RunningContainers answers %v, Changes %v", what, runOK, ok)
		}
	}
	want("empty, never refreshed", at(0), 0, false)
	c.UpdateTime(at(1))
	want("refreshed", at(0), 0, true)
	want("refreshed before the time asked", at(2), 0, false)
	c.Set("a", statusNamed("a", "a"), nil, at(1))
	want("set", at(0), 1, true)
	c.Set("a", statusNamed("a", "old"), nil, at(0))
	want("older set ignored", at(0), 1, true)
	c.Set("b", nil, errors.New("boom"), at(1))
	want("failed read", at(0), 2, false)
	c.Set("b", statusNamed("b", "b"), nil, at(2))
	want("read again", at(0), 3, true)
	c.Delete("b")
	want("deleted", at(0), 4, true)
	c.Delete("b")
	want("deleted again", at(0), 4, true)
	c.Set("c", nil, errors.New("boom"), at(2))
	c.Delete("c")
	want("failed read deleted", at(0), 6, true)
}

// TestCacheRunningContainers: the running containers of every pod, as a
// CRI list filtered on the running state gives them, sorted by ID.
func TestCacheRunningContainers(t *testing.T) {
	c := NewCache()
	created := at(5)
	c.Set("a", &runtime.PodStatus{ID: "a", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c2", Name: "app", SandboxID: "s1", State: runtime.ContainerStateRunning, Image: "busybox:1.36", ImageRef: "sha256:1", CreatedAt: created},
		{ID: "c1", Name: "init", SandboxID: "s1", State: runtime.ContainerStateExited},
	}}, nil, at(1))
	c.Set("b", &runtime.PodStatus{ID: "b", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c0", Name: "side", SandboxID: "s2", State: runtime.ContainerStateRunning},
	}}, nil, at(1))
	c.UpdateTime(at(1))
	got, ok := c.RunningContainers(at(0))
	if !ok {
		t.Fatal("RunningContainers did not answer from a current cache")
	}
	var ids []string
	for _, cs := range got {
		ids = append(ids, cs.GetId()+"/"+cs.GetPodSandboxId()+"/"+cs.GetMetadata().GetName()+"/"+cs.GetState().String())
	}
	if diff := cmp.Diff([]string{"c0/s2/side/CONTAINER_RUNNING", "c2/s1/app/CONTAINER_RUNNING"}, ids); diff != "" {
		t.Errorf("running containers (-want +got):\n%s", diff)
	}
	if got[1].GetImage().GetImage() != "busybox:1.36" || got[1].GetImageRef() != "sha256:1" || got[1].GetCreatedAt() != created.UnixNano() {
		t.Errorf("container c2 = %v", got[1])
	}
}

// TestCacheEachRunningContainer: the running containers of every pod with
// their pod's status, from a current cache only.
func TestCacheEachRunningContainer(t *testing.T) {
	c := NewCache()
	c.Set("a", &runtime.PodStatus{ID: "a", Name: "pa", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c2", Name: "app", State: runtime.ContainerStateRunning},
		{ID: "c1", Name: "init", State: runtime.ContainerStateExited},
	}}, nil, at(1))
	c.Set("b", &runtime.PodStatus{ID: "b", Name: "pb", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c0", Name: "side", State: runtime.ContainerStateRunning},
	}}, nil, at(1))
	seen := func(since time.Time) (map[string]string, bool) {
		got := map[string]string{}
		ok := c.EachRunningContainer(since, func(pod *runtime.PodStatus, cs *runtime.ContainerStatus) {
			got[cs.ID] = pod.Name + "/" + cs.Name
		})
		return got, ok
	}
	if got, ok := seen(at(0)); ok || len(got) != 0 {
		t.Errorf("a cache never refreshed answered %v", got)
	}
	c.UpdateTime(at(1))
	got, ok := seen(at(0))
	if !ok {
		t.Fatal("EachRunningContainer did not answer from a current cache")
	}
	if diff := cmp.Diff(map[string]string{"c0": "pb/side", "c2": "pa/app"}, got); diff != "" {
		t.Errorf("running containers (-want +got):\n%s", diff)
	}
	if got, ok := seen(at(2)); ok || len(got) != 0 {
		t.Errorf("a cache older than asked answered %v", got)
	}
}

// TestCacheAwait: Await returns the first status of the pod that
// satisfies cond, checking it after each change of the pod's entry and
// each refresh (with no status for a failed read or a deleted pod), and
// ends with its context.
func TestCacheAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		c.Set("p", statusNamed("p", "created"), nil, at(1))
		c.UpdateTime(at(2)) // a refresh after the entry: no busy loop
		var checked []string
		type result struct {
			status *runtime.PodStatus
			err    error
		}
		done := make(chan result, 1)
		go func() {
			s, err := c.Await(t.Context(), "p", func(s *runtime.PodStatus) bool {
				if s == nil {
					checked = append(checked, "none")
					return false
				}
				checked = append(checked, s.Name)
				return s.Name == "started"
			})
			done <- result{s, err}
		}()
		synctest.Wait()
		c.Set("p", nil, errors.New("read failed"), at(3))
		synctest.Wait()
		c.Set("q", statusNamed("q", "started"), nil, at(4)) // another pod
		c.UpdateTime(at(5))
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("Await returned before a status satisfied cond")
		}
		c.Set("p", statusNamed("p", "started"), nil, at(6))
		synctest.Wait()
		r := <-done
		if r.err != nil || r.status.Name != "started" {
			t.Fatalf("Await = %v, %v; want the started status", r.status, r.err)
		}
		// The entry at first; none for the read that failed, and again
		// at the refresh at 5, which left it current; then the new one.
		if want := []string{"created", "none", "none", "started"}; !slices.Equal(checked, want) {
			t.Errorf("cond saw %q, want %q", checked, want)
		}

		// A deletion wakes it, with no status.
		gone := make(chan bool, 1)
		go func() {
			_, err := c.Await(t.Context(), "p", func(s *runtime.PodStatus) bool { return s == nil })
			gone <- err == nil
		}()
		synctest.Wait()
		if len(gone) != 0 {
			t.Fatal("Await returned while the pod had a status")
		}
		c.Delete("p")
		synctest.Wait()
		if ok := <-gone; !ok {
			t.Error("Await did not see the pod deleted")
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if s, err := c.Await(ctx, "p", func(*runtime.PodStatus) bool { return false }); !errors.Is(err, context.DeadlineExceeded) || s != nil {
			t.Errorf("Await past its context = %v, %v; want nil, DeadlineExceeded", s, err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.waiters) != 0 {
			t.Errorf("%d pods still have waiters", len(c.waiters))
		}
	})
}

// TestCachePrune: Prune forgets the pods not kept that hold nothing of
// the runtime or a failed read, and no other: not a pod with a sandbox
// or container, not one kept, not one a reader waits for.
func TestCachePrune(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		now := time.Now()
		c.UpdateTime(now)
		c.Set("empty", &runtime.PodStatus{ID: "empty"}, nil, now)
		c.Set("failed", nil, errors.New("boom"), now)
		c.Set("kept", &runtime.PodStatus{ID: "kept"}, nil, now)
		c.Set("running", &runtime.PodStatus{ID: "running", ContainerStatuses: []*runtime.ContainerStatus{{ID: "c"}}}, nil, now)
		c.Set("awaited", &runtime.PodStatus{ID: "awaited"}, nil, now)
		go func() { _, _ = c.GetNewerThan(t.Context(), "awaited", now.Add(time.Hour)) }()
		synctest.Wait()

		gone := c.Prune(func(uid types.UID) bool { return uid == "kept" })
		slices.Sort(gone)
		if diff := cmp.Diff([]types.UID{"empty", "failed"}, gone); diff != "" {
			t.Errorf("Prune (-want +got):\n%s", diff)
		}
		for _, uid := range []types.UID{"kept", "running", "awaited"} {
			if _, ok := c.ReadAt(uid); !ok {
				t.Errorf("%s was pruned", uid)
			}
		}
		if _, ok := c.Pods(now); !ok {
			t.Error("the pruned failed read still counts as one")
		}
		c.UpdateTime(now.Add(2 * time.Hour)) // releases the reader
		synctest.Wait()
	})
}

// BenchmarkCacheAwaitWakes is a sync's wait for the events of a start:
// three statuses of the pod that do not show what it waits for, then one
// that does.
func BenchmarkCacheAwaitWakes(b *testing.B) {
	c := NewCache()
	st := statusNamed("p", "created")
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		_, err := c.Await(b.Context(), "p", func(*runtime.PodStatus) bool {
			n++
			if n < 4 {
				// The waiter is in: the Set wakes it.
				c.Set("p", st, nil, time.Now())
				return false
			}
			return true
		})
		if err != nil || n != 4 {
			b.Fatalf("Await = %v after %d checks", err, n)
		}
	}
}

// TestCacheLive: a live cache is current for the readers that ask for a
// refresh since a time, whatever the time; GetNewerThan still waits for
// a newer status or a refresh, and NewerWaited tells when one waits.
func TestCacheLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		waited := c.NewerWaited()
		future := time.Now().Add(time.Hour)
		if _, ok := c.Changes(future); ok {
			t.Fatal("a cache never refreshed is current")
		}
		c.SetLive(true)
		if _, ok := c.Changes(future); !ok {
			t.Error("Changes: a live cache is not current")
		}
		if _, ok := c.Pods(future); !ok {
			t.Error("Pods: a live cache is not current")
		}
		if _, ok := c.RunningContainers(future); !ok {
			t.Error("RunningContainers: a live cache is not current")
		}
		if c.WaitingNewer() {
			t.Fatal("WaitingNewer with no reader")
		}
		got := make(chan error, 1)
		go func() {
			_, err := c.GetNewerThan(t.Context(), "p", time.Now())
			got <- err
		}()
		synctest.Wait()
		select {
		case <-waited:
		default:
			t.Fatal("NewerWaited not signalled for a waiting reader")
		}
		if !c.WaitingNewer() {
			t.Fatal("no WaitingNewer with a reader waiting")
		}
		select {
		case <-got:
			t.Fatal("GetNewerThan released by a live cache without a refresh")
		default:
		}
		time.Sleep(time.Second)
		c.UpdateTime(time.Now())
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if c.WaitingNewer() {
			t.Error("WaitingNewer after the reader was released")
		}
		c.SetLive(false)
		if _, ok := c.Changes(future); ok {
			t.Error("a cache no longer live is current")
		}
	})
}
