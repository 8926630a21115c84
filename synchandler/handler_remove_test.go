package synchandler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/runtime"
)

// slowRuntime holds stopped pods whose removal takes a second each; the
// removal of "bad" fails.
type slowRuntime struct {
	pods []*runtime.Pod

	mu      sync.Mutex
	removed []types.UID
	forgot  []types.UID
}

func (r *slowRuntime) GetPods(context.Context, bool) ([]*runtime.Pod, error) { return r.pods, nil }

func (r *slowRuntime) RemovePod(_ context.Context, uid types.UID) error {
	time.Sleep(time.Second)
	if uid == "bad" {
		return errors.New("runtime: remove sandbox: device busy")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, uid)
	return nil
}

func (r *slowRuntime) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgot = append(r.forgot, uid)
}

// TestHousekeepingRemovesGonePodsAtOnce: the runtime objects of the pods
// no one wants are removed removeParallelism at a time, not one after the
// other (a pass over a churn's deleted pods lasted seconds, and
// housekeeping rests after a long pass); each removed pod is forgotten,
// and a failed removal is reported without holding the others.
func TestHousekeepingRemovesGonePodsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, want := goneRuntime(4 * removeParallelism)
		rt.pods = append(rt.pods, &runtime.Pod{ID: "bad", Name: "bad", Namespace: "default"})
		h, err := New(Config{
			Pods: podmanager.New(), Workers: &countingWorkers{}, Statuses: nopStatuses{}, Volumes: nopVolumes{},
			Probes: nopProbes{}, Cgroups: nopCgroups{}, Runtime: rt, Cache: nopCache{},
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = h.HandlePodCleanups(t.Context())
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("housekeeping took %s to remove %d pods of 1 s each, want 5 s", took, len(rt.pods))
		}
		if err == nil {
			t.Error("a failed removal was not reported")
		}
		sort.Slice(rt.removed, func(i, j int) bool { return rt.removed[i] < rt.removed[j] })
		sort.Slice(rt.forgot, func(i, j int) bool { return rt.forgot[i] < rt.forgot[j] })
		if diff := cmp.Diff(want, rt.removed); diff != "" {
			t.Errorf("removed (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, rt.forgot); diff != "" {
			t.Errorf("forgotten (-want +got):\n%s", diff)
		}
	})
}

// TestHousekeepingRemovesOffTheLoop: while Run runs, a housekeeping pass
// hands the gone pods' removals to it and returns at once (a pass over a
// churn's deleted pods held the sync loop for seconds, and the deletion
// of the pods that followed waited for it); the removals are made
// removeParallelism at a time, a pod pending removal is not queued twice,
// and a pod added again waits for its removal in flight.
func TestHousekeepingRemovesOffTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, want := goneRuntime(2 * removeParallelism)
		h, stop := runRemover(t, rt)

		start := time.Now()
		if err := h.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 0 {
			t.Errorf("housekeeping took %s, want no wait for the removals", took)
		}
		synctest.Wait()
		// A second pass while they are removed queues none again.
		if err := h.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The first removalParallelism are in flight: a pod added again
		// waits for its own, not for the others.
		readded := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "gone-00", Name: "gone-00", Namespace: "default"}}
		h.HandlePodAdditions(t.Context(), []*v1.Pod{readded})
		if took := time.Since(start); took != time.Second {
			t.Errorf("an addition of a pod being removed returned after %s, want 1s (its removal)", took)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sort.Slice(rt.removed, func(i, j int) bool { return rt.removed[i] < rt.removed[j] })
		if diff := cmp.Diff(want, rt.removed); diff != "" {
			t.Errorf("removed after 2 s (-want +got):\n%s", diff)
		}
		stop()
	})
}

// TestHousekeepingRetriesFailedRemoval: a removal that failed off the
// loop makes the next pass run (not skipped as one that would find
// nothing new) and queue it again.
func TestHousekeepingRetriesFailedRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &triedRuntime{slowRuntime: slowRuntime{pods: []*runtime.Pod{{ID: "bad", Name: "bad", Namespace: "default"}}}}
		h, stop := runRemover(t, rt)
		for range 3 {
			if err := h.HandlePodCleanups(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
		}
		if got := rt.removals(); got != 3 {
			t.Errorf("%d removals of a pod whose removal fails in 3 passes, want 3", got)
		}
		stop()
	})
}

// triedRuntime is a slowRuntime that counts the removals tried and
// tells housekeeping its pods never change.
type triedRuntime struct {
	slowRuntime
	tries int
}

func (r *triedRuntime) RemovePod(ctx context.Context, uid types.UID) error {
	r.mu.Lock()
	r.tries++
	r.mu.Unlock()
	return r.slowRuntime.RemovePod(ctx, uid)
}

func (r *triedRuntime) removals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries
}

func (r *triedRuntime) changes() (uint64, bool) { return 0, true }

// runRemover starts, in the test's bubble, a Handler on rt whose Run
// removes gone pods; stop ends Run and fails the test on its error.
func runRemover(t *testing.T, rt RuntimePods) (h *Handler, stop func()) {
	t.Helper()
	h, err := New(Config{
		Pods: podmanager.New(), Workers: &countingWorkers{}, Statuses: nopStatuses{}, Volumes: nopVolumes{},
		Probes: nopProbes{}, Cgroups: nopCgroups{}, Runtime: rt, Cache: nopCache{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	synctest.Wait()
	return h, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// goneRuntime is a slowRuntime holding n pods no one wants, gone-00 on,
// whose UIDs it returns in order.
func goneRuntime(n int) (*slowRuntime, []types.UID) {
	rt := &slowRuntime{}
	var uids []types.UID
	for i := range n {
		uid := types.UID(fmt.Sprintf("gone-%02d", i))
		rt.pods = append(rt.pods, &runtime.Pod{ID: uid, Name: string(uid), Namespace: "default"})
		uids = append(uids, uid)
	}
	return rt, uids
}
