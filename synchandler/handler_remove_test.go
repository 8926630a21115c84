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
		rt := &slowRuntime{}
		var want []types.UID
		for i := range 4 * removeParallelism {
			uid := types.UID(fmt.Sprintf("gone-%02d", i))
			rt.pods = append(rt.pods, &runtime.Pod{ID: uid, Name: string(uid), Namespace: "default"})
			want = append(want, uid)
		}
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
