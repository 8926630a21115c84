package synchandler

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
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
)

// countingWorkers are pod workers that count the questions asked of
// them; ended are the pods known terminated.
type countingWorkers struct {
	mu           sync.Mutex
	ends         uint64
	ended        map[types.UID]bool
	terminatedQs int
	syncKnown    int
	noCounter    bool
}

func (w *countingWorkers) UpdatePod(podworker.UpdateOptions)        {}
func (w *countingWorkers) IsPodTerminationRequested(types.UID) bool { return false }
func (w *countingWorkers) IsPodKnownTerminated(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.terminatedQs++
	return w.ended[uid]
}

func (w *countingWorkers) SyncKnownPods([]*v1.Pod) map[types.UID]podworker.PodWorkerSync {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncKnown++
	return nil
}

func (w *countingWorkers) Terminations() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ends
}

func (w *countingWorkers) end(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended == nil {
		w.ended = map[types.UID]bool{}
	}
	w.ended[uid] = true
	w.ends++
}

// uncountedWorkers hide the Terminations of countingWorkers.
type uncountedWorkers struct{ PodWorkers }

// countingRuntime lists no runtime pods and counts the lists; its
// changes are set by the test.
type countingRuntime struct {
	lists   int
	count   uint64
	current bool
	err     error
}

func (r *countingRuntime) GetPods(context.Context, bool) ([]*runtime.Pod, error) {
	r.lists++
	return nil, r.err
}
func (r *countingRuntime) RemovePod(context.Context, types.UID) error { return nil }
func (r *countingRuntime) Forget(types.UID)                           {}
func (r *countingRuntime) changes() (uint64, bool)                    { return r.count, r.current }

type nopStatuses struct{}

func (nopStatuses) SetPodStatus(*v1.Pod, v1.PodStatus) bool                 { return true }
func (nopStatuses) GetPodStatus(types.UID) (v1.PodStatus, bool)             { return v1.PodStatus{}, false }
func (nopStatuses) PodTerminated(types.UID)                                 {}
func (nopStatuses) RemoveOrphans(map[types.UID]bool)                        {}
func (nopVolumes) AddPod(*v1.Pod)                                           {}
func (nopVolumes) CleanupOrphans(context.Context, map[types.UID]bool) error { return nil }
func (nopProbes) AddPod(*v1.Pod)                                            {}
func (nopProbes) RemovePod(*v1.Pod)                                         {}
func (nopProbes) CleanupPods(map[types.UID]bool)                            {}
func (nopCgroups) Enabled() bool                                            { return false }
func (nopCgroups) UpdateQoS([]*v1.Pod) error                                { return nil }
func (nopCgroups) Pods() ([]types.UID, error)                               { return nil, nil }
func (nopCgroups) DestroyPod(context.Context, types.UID) error              { return nil }
func (nopCache) Delete(types.UID)                                           {}

type (
	nopVolumes struct{}
	nopProbes  struct{}
	nopCgroups struct{}
	nopCache   struct{}
)

func newCountingHandler(t *testing.T, w PodWorkers, rt RuntimePods, admit ...admission.Handler) *Handler {
	t.Helper()
	h, err := New(Config{
		Pods: podmanager.New(), Workers: w, Statuses: nopStatuses{}, Volumes: nopVolumes{},
		Probes: nopProbes{}, Cgroups: nopCgroups{}, Runtime: rt, Cache: nopCache{}, Admit: admit,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func idlePod(i int) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i)),
	}}
}

// TestHousekeepingSkipsUnchangedPasses: a housekeeping pass runs in full
// only when the pods, the workers' terminations or the runtime's pods
// changed since the last pass that succeeded, after a failed pass, and
// every fullCleanupPeriod; otherwise it lists nothing.
func TestHousekeepingSkipsUnchangedPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := &countingWorkers{}
		rt := &countingRuntime{current: true}
		h := newCountingHandler(t, w, rt)
		passes := func() int { return rt.lists }
		step := func(name string, want int) {
			t.Helper()
			err := h.HandlePodCleanups(ctx)
			if rt.err == nil && err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := passes(); got != want {
				t.Fatalf("%s: %d full passes, want %d", name, got, want)
			}
			time.Sleep(2 * time.Second)
		}
		step("first pass", 1)
		step("nothing changed", 1)
		step("nothing changed again", 1)

		h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(1)})
		step("pod added", 2)
		step("nothing changed after the addition", 2)

		w.end("uid-1")
		step("worker ended", 3)
		step("nothing changed after the end", 3)

		rt.count++
		step("runtime pods changed", 4)
		step("nothing changed after the runtime", 4)

		h.HandlePodRemoves(ctx, []*v1.Pod{idlePod(1)})
		step("pod removed", 5)
		step("nothing changed after the removal", 5)

		rt.count++
		rt.err = errors.New("runtime down")
		step("failing pass", 6)
		rt.err = nil
		step("pass after a failed one", 7)
		step("nothing changed after the recovery", 7)

		rt.current = false
		step("runtime pods not from a current cache", 8)
		step("still not current", 9)
		rt.current = true
		step("current again", 10)
		step("nothing changed once current", 10)

		// The passes so far took 2 s each; the full pass comes within
		// fullCleanupPeriod of the last one.
		n := passes()
		for range int(fullCleanupPeriod/(2*time.Second)) + 1 {
			if err := h.HandlePodCleanups(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
		}
		if got := passes() - n; got != 1 {
			t.Fatalf("%d full passes over %v with nothing changed, want 1", got, fullCleanupPeriod)
		}
	})
}

// TestHousekeepingRunsEveryPassWithoutCounts: parts that cannot count
// their changes (a user's pod workers) get every pass in full, as the
// kubelet's.
func TestHousekeepingRunsEveryPassWithoutCounts(t *testing.T) {
	rt := &countingRuntime{current: true}
	h := newCountingHandler(t, uncountedWorkers{&countingWorkers{}}, rt)
	for range 3 {
		if err := h.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if rt.lists != 3 {
		t.Fatalf("%d full passes, want 3", rt.lists)
	}
}

// TestAdmissionKeepsActivePods: pods added one at a time are admitted
// against every active pod, without the active pods being listed again
// for each (the API server's source adds one pod per update); a removal,
// a pod that terminated and an update are all seen by the next admission.
func TestAdmissionKeepsActivePods(t *testing.T) {
	ctx := t.Context()
	w := &countingWorkers{}
	var seen []types.UID
	record := admission.Func(func(_ *v1.Pod, active []*v1.Pod) admission.Result {
		seen = seen[:0]
		for _, p := range active {
			seen = append(seen, p.UID)
		}
		return admission.Result{Admit: true}
	})
	h := newCountingHandler(t, w, &countingRuntime{current: true}, record)
	const n = 200
	for i := range n {
		h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(i)})
	}
	if len(seen) != n-1 {
		t.Fatalf("the last pod was admitted against %d active pods, want %d", len(seen), n-1)
	}
	// The first batch lists the (no) active pods; the others reuse them.
	if w.terminatedQs != 0 {
		t.Fatalf("%d questions to the workers over %d single-pod batches, want 0", w.terminatedQs, n)
	}

	h.HandlePodRemoves(ctx, []*v1.Pod{idlePod(0)})
	w.end("uid-1")
	updated := idlePod(2)
	updated.Labels = map[string]string{"updated": "yes"}
	h.HandlePodUpdates(ctx, []*v1.Pod{updated})
	var got *v1.Pod
	h.c.Admit = append(h.c.Admit, admission.Func(func(_ *v1.Pod, active []*v1.Pod) admission.Result {
		for _, p := range active {
			if p.UID == updated.UID {
				got = p
			}
		}
		return admission.Result{Admit: true}
	}))
	h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(n)})
	if slices.Contains(seen, "uid-0") || slices.Contains(seen, "uid-1") || len(seen) != n-2 {
		t.Fatalf("after a removal and a termination, admitted against %d pods (uid-0 %v, uid-1 %v), want %d without them",
			len(seen), slices.Contains(seen, "uid-0"), slices.Contains(seen, "uid-1"), n-2)
	}
	if got != updated {
		t.Fatalf("admission saw the pod before its update")
	}

	// An update alone keeps the active pods and replaces the pod in them.
	qs := w.terminatedQs
	again := idlePod(3)
	again.Labels = map[string]string{"updated": "again"}
	h.HandlePodUpdates(ctx, []*v1.Pod{again})
	h.HandlePodReconcile(ctx, []*v1.Pod{idlePod(4)})
	h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(n + 1)})
	if w.terminatedQs != qs {
		t.Fatalf("an update made the next admission list the active pods again")
	}
	if len(seen) != n-1 {
		t.Fatalf("admitted against %d pods, want %d", len(seen), n-1)
	}
}

// TestHousekeepingDropsGoneActivePods: the active pods kept for admission
// are let go by the housekeeping pass after the pods are removed, not
// kept until the next addition.
func TestHousekeepingDropsGoneActivePods(t *testing.T) {
	w := &countingWorkers{}
	h := newCountingHandler(t, w, &countingRuntime{current: true})
	var pods []*v1.Pod
	for i := range 10 {
		pods = append(pods, idlePod(i))
	}
	h.HandlePodAdditions(t.Context(), pods)
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.activeMu.Lock()
	n := len(h.active.pods)
	h.activeMu.Unlock()
	if n != 10 {
		t.Fatalf("%d active pods kept with the 10 pods running, want 10", n)
	}
	h.HandlePodRemoves(t.Context(), pods)
	for _, p := range pods {
		w.end(p.UID)
	}
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.activeMu.Lock()
	n = len(h.active.pods) + len(h.active.index)
	h.activeMu.Unlock()
	if n != 0 {
		t.Errorf("the removed pods are still held for admission (%d entries)", n)
	}
}

// knownWorkers are pod workers whose SyncKnownPods answers with the pods
// the test sets.
type knownWorkers struct {
	countingWorkers
	known map[types.UID]podworker.PodWorkerSync
}

func (w *knownWorkers) SyncKnownPods([]*v1.Pod) map[types.UID]podworker.PodWorkerSync {
	return w.known
}

// forgettingRuntime records the pods the runtime manager is told to
// forget.
type forgettingRuntime struct {
	countingRuntime
	forgot []types.UID
}

func (r *forgettingRuntime) Forget(uid types.UID) { r.forgot = append(r.forgot, uid) }

type recordingCache struct{ deleted []types.UID }

func (c *recordingCache) Delete(uid types.UID) { c.deleted = append(c.deleted, uid) }

// TestHousekeepingForgetsPodsWithNothingLeft: a pod whose worker went,
// that no source wants and that has nothing in the runtime (stopped
// before it started) is forgotten by the runtime manager and the status
// cache at the next pass; a pod still with a worker is not.
func TestHousekeepingForgetsPodsWithNothingLeft(t *testing.T) {
	w := &knownWorkers{known: map[types.UID]podworker.PodWorkerSync{
		"gone": {State: podworker.TerminatedPod, Orphan: true}, "kept": {State: podworker.SyncPod},
	}}
	rt := &forgettingRuntime{}
	cache := &recordingCache{}
	h, err := New(Config{
		Pods: podmanager.New(), Workers: w, Statuses: nopStatuses{}, Volumes: nopVolumes{},
		Probes: nopProbes{}, Cgroups: nopCgroups{}, Runtime: rt, Cache: cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(rt.forgot)+len(cache.deleted) != 0 {
		t.Fatalf("forgotten while their workers are there: runtime %v, cache %v", rt.forgot, cache.deleted)
	}
	delete(w.known, "gone")
	w.end("gone")
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]types.UID{"gone"}, rt.forgot); diff != "" {
		t.Errorf("runtime manager forgot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.UID{"gone"}, cache.deleted); diff != "" {
		t.Errorf("status cache forgot (-want +got):\n%s", diff)
	}
}

// pruningCache is a status cache holding the pods set, that prunes as
// pleg.StatusCache does for pods with nothing in the runtime.
type pruningCache struct {
	recordingCache
	pods map[types.UID]bool
}

func (c *pruningCache) Prune(keep func(types.UID) bool) []types.UID {
	var gone []types.UID
	for uid := range c.pods {
		if !keep(uid) {
			delete(c.pods, uid)
			gone = append(gone, uid)
		}
	}
	return gone
}

// TestHousekeepingPrunesTheCache: the status cache's pods that housekeeping
// no longer knows (no source wants them, no worker) are pruned, and the
// runtime manager forgets them, even when no pass saw their worker.
func TestHousekeepingPrunesTheCache(t *testing.T) {
	w := &knownWorkers{known: map[types.UID]podworker.PodWorkerSync{"worker": {State: podworker.TerminatedPod}}}
	rt := &forgettingRuntime{}
	cache := &pruningCache{pods: map[types.UID]bool{"worker": true, "desired": true, "gone": true}}
	pods := podmanager.New()
	pods.AddOrUpdate(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default", UID: "desired"}})
	h, err := New(Config{
		Pods: pods, Workers: w, Statuses: nopStatuses{}, Volumes: nopVolumes{},
		Probes: nopProbes{}, Cgroups: nopCgroups{}, Runtime: rt, Cache: cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.UID]bool{"worker": true, "desired": true}, cache.pods); diff != "" {
		t.Errorf("cache after housekeeping (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.UID{"gone"}, rt.forgot); diff != "" {
		t.Errorf("runtime manager forgot (-want +got):\n%s", diff)
	}
}

// TestHousekeepingSettled: the handler tells the sync loop that a pass
// would find nothing to do only after a pass that succeeded, with nothing
// it depends on changed since and no removal pending, and never when a
// part cannot count its changes.
func TestHousekeepingSettled(t *testing.T) {
	ctx := t.Context()
	w := &countingWorkers{}
	rt := &countingRuntime{current: true}
	h := newCountingHandler(t, w, rt)
	settled := func(name string, want bool) {
		t.Helper()
		if got := h.HousekeepingSettled(); got != want {
			t.Fatalf("%s: settled %v, want %v", name, got, want)
		}
	}
	pass := func() {
		t.Helper()
		_ = h.HandlePodCleanups(ctx)
	}
	settled("before the first pass", false)
	pass()
	settled("after the first pass", true)

	h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(1)})
	settled("pod added", false)
	pass()
	settled("after the addition's pass", true)

	w.end("uid-1")
	settled("worker ended", false)
	pass()
	settled("after the end's pass", true)

	rt.count++
	settled("runtime pods changed", false)
	pass()
	settled("after the runtime's pass", true)

	rt.count++
	rt.err = errors.New("runtime down")
	pass()
	settled("after a failed pass", false)
	rt.err = nil
	pass()
	settled("after the recovery", true)

	// A removal queued and not yet done.
	h.rm.mu.Lock()
	h.rm.pending = map[types.UID]chan struct{}{"uid-2": make(chan struct{})}
	h.rm.mu.Unlock()
	settled("removal pending", false)
	h.rm.mu.Lock()
	h.rm.doneLocked("uid-2")
	h.rm.mu.Unlock()
	settled("removal done", true)

	rt.current = false
	settled("runtime pods not from a current cache", false)

	u := newCountingHandler(t, uncountedWorkers{&countingWorkers{}}, &countingRuntime{current: true})
	_ = u.HandlePodCleanups(ctx)
	if u.HousekeepingSettled() {
		t.Fatal("settled with workers that cannot count their changes")
	}
}
