package synchandler

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// waitingMirrors counts its Syncs and reports waiting as set.
type waitingMirrors struct {
	syncs   int
	waiting bool
}

func (m *waitingMirrors) Sync(context.Context, []*v1.Pod) error { m.syncs++; return nil }
func (m *waitingMirrors) Waiting() bool                         { return m.waiting }

// While the mirror pods wait (the API server is away), every housekeeping
// pass calls their Sync, as after a failed pass but without an error;
// otherwise an unchanged pass is skipped.
func TestHousekeepingCallsWaitingMirrors(t *testing.T) {
	rt := &countingRuntime{current: true}
	h := newCountingHandler(t, &countingWorkers{}, rt)
	mirrors := &waitingMirrors{waiting: true}
	h.c.Mirrors = mirrors
	for range 3 {
		if err := h.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if mirrors.syncs != 3 {
		t.Errorf("%d Syncs in 3 passes while the mirror pods wait, want 3", mirrors.syncs)
	}
	mirrors.waiting = false
	for range 3 {
		if err := h.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if mirrors.syncs != 4 {
		t.Errorf("%d Syncs after 3 more passes once they no longer wait, want 4 (the first only)", mirrors.syncs)
	}
}
