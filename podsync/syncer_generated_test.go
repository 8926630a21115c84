package podsync

import (
	"sync/atomic"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/status"
)

// countingStatuses counts the API statuses generated and handed over.
type countingStatuses struct {
	*status.Manager
	sets atomic.Int64
}

func (c *countingStatuses) SetPodStatus(pod *v1.Pod, st v1.PodStatus) bool {
	c.sets.Add(1)
	return c.Manager.SetPodStatus(pod, st)
}

// TestSyncAfterStartTakesGeneratedStatus: the sync the runtime's events
// bring after a pod's start, from the status the start read back, takes
// the API status generated from it rather than generate it again, and
// still reaches the runtime; a sync from another runtime status
// generates.
func TestSyncAfterStartTakesGeneratedStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cleanup := newSettleFixture(t)
		defer cleanup()
		counting := &countingStatuses{Manager: f.s.c.Statuses.(*status.Manager)}
		f.s.c.Statuses = counting
		f.sync("create", podworker.SyncPodCreate, f.pod, f.read(), 1)
		sets := counting.sets.Load()
		if sets != 2 {
			t.Errorf("the start generated %d API statuses, want 2 (before, and read back)", sets)
		}
		rb, err := f.s.c.Cache.(*pleg.StatusCache).Get(f.pod.UID)
		if err != nil || rb == nil {
			t.Fatalf("no status read back in the cache: %v", err)
		}
		f.sync("the sync of the start's events", podworker.SyncPodSync, f.pod, rb, 2)
		if got := counting.sets.Load(); got != sets {
			t.Errorf("the sync from the status read back generated %d API statuses, want 0", got-sets)
		}
		f.sync("settled on it", podworker.SyncPodSync, f.pod, rb, 2)
		if got, _ := counting.GetPodStatus(f.pod.UID); got.Phase != v1.PodRunning {
			t.Errorf("phase %s, want Running", got.Phase)
		}
		f.sync("new runtime status", podworker.SyncPodSync, f.pod, f.read(), 3)
		if got := counting.sets.Load(); got != sets+1 {
			t.Errorf("a sync from a new runtime status generated %d API statuses, want 1", got-sets)
		}
	})
}
