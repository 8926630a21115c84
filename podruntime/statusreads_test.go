package podruntime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// gatedRuntime holds every ListPodSandbox until gate closes, and counts
// the calls inside it.
type gatedRuntime struct {
	*critest.FakeRuntimeService
	gate         chan struct{}
	inside, most atomic.Int32
}

func (g *gatedRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	n := g.inside.Add(1)
	defer g.inside.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.FakeRuntimeService.ListPodSandbox(ctx, f)
}

func TestGetPodStatusBoundsParallelReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs := &gatedRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), gate: make(chan struct{})}
		m, err := New(rs, critest.NewFakeImageService(), Options{MaxParallelStatusReads: 3})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := range 10 {
			wg.Go(func() {
				_, err := m.GetPodStatus(t.Context(), types.UID(string(rune('a'+i))), "p", "ns")
				errs <- err
			})
		}
		synctest.Wait()
		if got := rs.inside.Load(); got != 3 {
			t.Errorf("status reads in the runtime with 10 callers = %d, want MaxParallelStatusReads (3)", got)
		}
		close(rs.gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("GetPodStatus: %v", err)
			}
		}
		if got := rs.most.Load(); got != 3 {
			t.Errorf("most status reads at once = %d, want 3", got)
		}
	})
}

func TestGetPodStatusWaitingForATurnEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs := &gatedRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), gate: make(chan struct{})}
		m, err := New(rs, critest.NewFakeImageService(), Options{MaxParallelStatusReads: 1})
		if err != nil {
			t.Fatal(err)
		}
		held := make(chan error, 1)
		go func() {
			_, err := m.GetPodStatus(t.Context(), "held", "p", "ns")
			held <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		waiting := make(chan error, 1)
		go func() {
			_, err := m.GetPodStatus(ctx, "waiting", "p", "ns")
			waiting <- err
		}()
		synctest.Wait()
		if got := rs.inside.Load(); got != 1 {
			t.Fatalf("status reads in the runtime = %d, want 1", got)
		}
		cancel()
		if err := <-waiting; !errors.Is(err, context.Canceled) {
			t.Errorf("GetPodStatus waiting for its turn, context canceled: err = %v, want context.Canceled", err)
		}
		close(rs.gate)
		if err := <-held; err != nil {
			t.Errorf("GetPodStatus holding the turn: %v", err)
		}
	})
}
