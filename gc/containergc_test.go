package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/periodic"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func sandboxConfig(uid string, attempt uint32) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + uid, Namespace: "ns", Uid: uid, Attempt: attempt},
		Labels:   map[string]string{runtime.LabelPodUID: uid},
	}
}

// addContainer creates and starts a container in the sandbox; exit makes
// it exit at once.
func addContainer(t *testing.T, rt *runtimetest.Runtime, sb string, sbc *runtimeapi.PodSandboxConfig, name string, exit bool) string {
	t.Helper()
	ctx := t.Context()
	id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  []string{"sleep", "infinity"},
		Labels:   map[string]string{runtime.LabelPodUID: sbc.Metadata.Uid, runtime.LabelContainerName: name},
	}, sbc)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if exit {
		if err := rt.ExitContainer(id, 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func runSandbox(t *testing.T, rt *runtimetest.Runtime, sbc *runtimeapi.PodSandboxConfig, stop bool) string {
	t.Helper()
	id, err := rt.RunPodSandbox(t.Context(), sbc, "")
	if err != nil {
		t.Fatal(err)
	}
	if stop {
		if err := rt.StopPodSandbox(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func listIDs(t *testing.T, rt *runtimetest.Runtime) (cs, sbs []string) {
	t.Helper()
	ctx := context.Background()
	lc, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range lc {
		cs = append(cs, c.Id)
	}
	ls, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ls {
		sbs = append(sbs, s.Id)
	}
	slices.Sort(cs)
	slices.Sort(sbs)
	return cs, sbs
}

// TestContainerCollectorRun: the collector removes nothing before its
// period, collects on Trigger at once and every RetryPeriod for a Period
// after it, retries a failed listing after RetryPeriod, and leaves a
// running pod's current sandbox and container alone. On Run's own
// goroutine and as a task of a periodic.Driver.
func TestContainerCollectorRun(t *testing.T) {
	for _, driver := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", driver), func(t *testing.T) { testContainerCollectorRun(t, driver) })
	}
}

func testContainerCollectorRun(t *testing.T, driver bool) {
	synctest.Test(t, func(t *testing.T) {
		var d *periodic.Driver
		if driver {
			d = periodictest.Start(t)
		}
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		logs := t.TempDir()
		// Pod "a" runs; a crash left a half-made sandbox before its
		// current one. Pod "gone" was deleted.
		a := sandboxConfig("a", 0)
		halfMade := runSandbox(t, rt, a, true)
		time.Sleep(time.Second)
		current := runSandbox(t, rt, sandboxConfig("a", 1), false)
		var dead []string
		for range 3 {
			dead = append(dead, addContainer(t, rt, current, a, "app", true))
			time.Sleep(time.Second)
		}
		live := addContainer(t, rt, current, a, "app", false)
		g := sandboxConfig("gone", 0)
		goneSB := runSandbox(t, rt, g, false)
		goneC := addContainer(t, rt, goneSB, g, "app", true)
		if err := rt.StopPodSandbox(t.Context(), goneSB); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"ns_pod-gone_gone", "ns_pod-a_a"} {
			if err := os.Mkdir(filepath.Join(logs, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}

		c, err := NewContainerCollector(rt, ContainerOptions{
			Pods:       pods{deleted: map[types.UID]bool{"gone": true}},
			PodLogsDir: logs,
			Periodic:   d,
			Logger:     testr.New(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		synctest.Wait()
		if n := rt.Calls("ListContainers"); n != 0 {
			t.Fatalf("%d listings before the first period or trigger", n)
		}

		rt.SetDown(true)
		c.Trigger()
		synctest.Wait()
		if n := rt.Calls("ListContainers"); n != 1 {
			t.Fatalf("%d listings after Trigger, want 1", n)
		}
		rt.SetDown(false)
		time.Sleep(DefaultRetryPeriod)
		synctest.Wait()
		if n := rt.Calls("ListContainers"); n != 2 {
			t.Fatalf("%d listings after a failure and RetryPeriod, want 2", n)
		}
		gotC, gotSB := listIDs(t, rt)
		wantC := []string{dead[2], live}
		slices.Sort(wantC)
		if !slices.Equal(gotC, wantC) {
			t.Errorf("containers left %v, want the newest dead one and the live one %v", gotC, wantC)
		}
		if !slices.Equal(gotSB, []string{current}) {
			t.Errorf("sandboxes left %v, want only the current one %s (half-made %s, gone %s)", gotSB, current, halfMade, goneSB)
		}
		if slices.Contains(gotC, goneC) {
			t.Errorf("the deleted pod's container %s is left", goneC)
		}
		if _, err := os.Stat(filepath.Join(logs, "ns_pod-gone_gone")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the deleted pod's log directory is left: %v", err)
		}
		if _, err := os.Stat(filepath.Join(logs, "ns_pod-a_a")); err != nil {
			t.Errorf("the live pod's log directory: %v", err)
		}

		// After a Trigger, a collection every RetryPeriod for one Period
		// (at +10s, ..., +60s), then every Period.
		base := rt.Calls("ListContainers") // listIDs listed too
		time.Sleep(DefaultContainerPeriod - DefaultRetryPeriod)
		synctest.Wait()
		if n := rt.Calls("ListContainers") - base; n != 11 {
			t.Fatalf("%d collections in the minute after Trigger, want 11", n)
		}
		base = rt.Calls("ListContainers")
		time.Sleep(DefaultContainerPeriod - time.Second)
		synctest.Wait()
		if n := rt.Calls("ListContainers") - base; n != 0 {
			t.Fatalf("%d listings before the period, want none", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := rt.Calls("ListContainers") - base; n != 1 {
			t.Fatalf("%d listings after the period, want 1", n)
		}
	})
}

// TestContainerCollectorRefused: a runtime that refuses a removal gives an
// error naming the object, and the rest of the plan goes on.
func TestContainerCollectorRefused(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	g := sandboxConfig("gone", 0)
	sb := runSandbox(t, rt, g, false)
	addContainer(t, rt, sb, g, "app", true)
	if err := rt.StopPodSandbox(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	rt.InjectError("RemoveContainer", errors.New("device busy"))
	c, err := NewContainerCollector(rt, ContainerOptions{
		Pods:       pods{deleted: map[types.UID]bool{"gone": true}},
		PodLogsDir: "-",
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := c.Collect(t.Context(), false)
	if err == nil || len(plan.Containers) != 1 {
		t.Fatalf("Collect = %+v, %v; want one container planned and an error", plan, err)
	}
	if got := err.Error(); !containsAll(got, "removing container", "device busy", "gone") {
		t.Errorf("error %q does not say what failed", got)
	}
	// The sandbox still went (CRI removes a sandbox's containers with it).
	if _, sbs := listIDs(t, rt); len(sbs) != 0 {
		t.Errorf("sandboxes left %v", sbs)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// countingLister counts the runtime's container lists.
type countingLister struct {
	*runtimetest.Runtime
	lists int
}

func (c *countingLister) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	c.lists++
	return c.Runtime.ListContainers(ctx, f)
}

// TestContainerCollectorSkipsUnchanged: with Changes, a collection that
// finds the count where a complete, empty collection left it does not
// list the runtime; it lists when the count moves, when the last one
// removed something, when the count cannot be told, after Resync, and for
// the eviction manager's reclaim.
func TestContainerCollectorSkipsUnchanged(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	a := sandboxConfig("a", 0)
	sb := runSandbox(t, rt, a, false)
	addContainer(t, rt, sb, a, "app", false)
	lr := &countingLister{Runtime: rt}
	var count uint64
	told := true
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := NewContainerCollector(lr, ContainerOptions{
		Pods:       pods{deleted: map[types.UID]bool{"gone": true}},
		PodLogsDir: "-",
		Changes:    func() (uint64, bool) { return count, told },
		Clock:      clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	collect := func(evict bool) ContainerPlan {
		t.Helper()
		p, err := c.Collect(t.Context(), evict)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	collect(false)
	collect(false)
	if lr.lists != 1 {
		t.Errorf("two collections over an unchanged count listed %d times, want 1", lr.lists)
	}
	// A deleted pod's dead container appears: the count moves; the
	// collection that removes it is followed by one that lists again.
	g := sandboxConfig("gone", 0)
	gsb := runSandbox(t, rt, g, true)
	count++
	if p := collect(false); len(p.Sandboxes) != 1 || p.Sandboxes[0].ID != gsb {
		t.Errorf("after the count moved: plan %+v, want the gone pod's sandbox removed", p)
	}
	collect(false)
	collect(false)
	if lr.lists != 3 {
		t.Errorf("after a removal: listed %d times, want 3", lr.lists)
	}
	told = false
	collect(false)
	told = true
	collect(false)
	collect(false)
	if lr.lists != 5 {
		t.Errorf("count not told once: listed %d times, want 5", lr.lists)
	}
	collect(true)
	if lr.lists != 6 {
		t.Errorf("reclaim: listed %d times, want 6", lr.lists)
	}
	clk.Step(DefaultContainerResync)
	collect(false)
	collect(false)
	if lr.lists != 7 {
		t.Errorf("resync: listed %d times, want 7", lr.lists)
	}
}

// cachedLister is a runtime with a cache (CachedLister) that answers the
// pods with something dead from a listing of the runtime it counts apart.
type cachedLister struct {
	countingLister
	cacheOK bool
	cached  int
}

func (c *cachedLister) CachedListing() ([]*runtimeapi.Container, []*runtimeapi.PodSandbox, bool) {
	if !c.cacheOK {
		return nil, nil, false
	}
	c.cached++
	cs, err := c.Runtime.ListContainers(context.Background(), nil)
	if err != nil {
		return nil, nil, false
	}
	sbs, err := c.Runtime.ListPodSandbox(context.Background(), nil)
	if err != nil {
		return nil, nil, false
	}
	return cs, sbs, true
}

// TestContainerCollectorReadsCache: a runtime with a current cache answers
// a collection's listing (the first after a start too), which removes
// what a listing of the runtime would; the runtime itself is listed when
// the cache cannot answer, every Resync and for the reclaim.
func TestContainerCollectorReadsCache(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	a := sandboxConfig("a", 0)
	sb := runSandbox(t, rt, a, false)
	addContainer(t, rt, sb, a, "app", false)
	g := sandboxConfig("gone", 0)
	gsb := runSandbox(t, rt, g, true)
	lr := &cachedLister{countingLister: countingLister{Runtime: rt}, cacheOK: true}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := NewContainerCollector(lr, ContainerOptions{
		Pods:       pods{deleted: map[types.UID]bool{"gone": true}},
		PodLogsDir: "-",
		Clock:      clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	collect := func(evict bool) ContainerPlan {
		t.Helper()
		p, err := c.Collect(t.Context(), evict)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	clk.Step(time.Minute)
	if p := collect(false); len(p.Sandboxes) != 1 || p.Sandboxes[0].ID != gsb {
		t.Errorf("plan %+v, want the gone pod's sandbox removed", p)
	}
	if lr.lists != 0 || lr.cached != 1 {
		t.Errorf("first collection: %d runtime lists, %d cached, want 0 and 1", lr.lists, lr.cached)
	}
	lr.cacheOK = false
	collect(false)
	if lr.lists != 1 {
		t.Errorf("cache not current: %d runtime lists, want 1", lr.lists)
	}
	lr.cacheOK = true
	collect(false)
	collect(true)
	if lr.lists != 2 || lr.cached != 2 {
		t.Errorf("cached then reclaim: %d runtime lists, %d cached, want 2 and 2", lr.lists, lr.cached)
	}
	clk.Step(DefaultContainerResync)
	collect(false)
	if lr.lists != 3 {
		t.Errorf("resync: %d runtime lists, want 3", lr.lists)
	}
}

// TestContainerCollectorLogDirsEveryCollection: a collection that skips
// listing the runtime (Changes did not move) still reads the pod log
// directories, as the kubelet's evictPodLogsDirectories does every
// collection: the log directory of a pod whose content may go (one
// that appeared out of the count's sight) is removed at the next
// collection, within a Period as on the kubelet, not a Resync (10m)
// later; a live pod's stays, and the runtime is still not listed.
func TestContainerCollectorLogDirsEveryCollection(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	defer rt.Close()
	lr := &countingLister{Runtime: rt}
	logs := t.TempDir()
	deleted := map[types.UID]bool{}
	c, err := NewContainerCollector(lr, ContainerOptions{
		Pods:       pods{deleted: deleted},
		PodLogsDir: logs,
		Changes:    func() (uint64, bool) { return 7, true },
		Clock:      clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Collect(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ns_gone_u1", "ns_live_u2"} {
		if err := os.MkdirAll(filepath.Join(logs, d, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deleted["u1"] = true
	plan, err := c.Collect(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.LogDirs, []string{"ns_gone_u1"}) {
		t.Errorf("log directories planned %v, want [ns_gone_u1]", plan.LogDirs)
	}
	if _, err := os.Stat(filepath.Join(logs, "ns_gone_u1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the gone pod's log directory is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(logs, "ns_live_u2")); err != nil {
		t.Errorf("the live pod's log directory: %v", err)
	}
	if lr.lists != 1 {
		t.Errorf("the runtime was listed %d times, want once (the count did not move)", lr.lists)
	}
}
