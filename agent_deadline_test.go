package nodekit_test

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// TestAgentActiveDeadlineStopsContainers: a pod past its
// activeDeadlineSeconds is Failed with DeadlineExceeded and its container
// stops within 1.5 s of the deadline, as a kubelet's does (about 1 s): the
// work queue wakes the pod at its deadline rather than at a later tick,
// and the kill starts at once.
func TestAgentActiveDeadlineStopsContainers(t *testing.T) {
	for _, deadline := range []int64{2, 7} {
		synctest.Test(t, func(t *testing.T) {
			rt := runtimetest.New(runtimetest.Options{})
			defer rt.Close()
			src := make(chanSource, 1)
			h := startAgent(t, rt, nodekit.Options{Sources: []nodekit.NamedSource{{Name: "test", Source: src}}})
			pod := testPod("deadline", v1.RestartPolicyNever, nil, "sleep 3600")
			pod.Spec.ActiveDeadlineSeconds = ptr(deadline)
			// Off the sync loop's one-second ticks, so that a deadline
			// acted on at a tick rather than when it passes shows.
			time.Sleep(300 * time.Millisecond)
			src <- []*v1.Pod{pod}
			time.Sleep(time.Duration(deadline)*time.Second + 5*time.Second)
			synctest.Wait()

			s, ok := h.status("default/deadline")
			if !ok || s.Phase != v1.PodFailed || s.Reason != "DeadlineExceeded" {
				t.Fatalf("status %s %q, want Failed DeadlineExceeded", s.Phase, s.Reason)
			}
			if s.StartTime == nil {
				t.Fatal("no start time")
			}
			var found bool
			for _, c := range rt.Containers() {
				if c.Name != "c0" {
					continue
				}
				found = true
				if c.FinishedAt.IsZero() {
					t.Fatalf("container c0 still running %v after the deadline", 5*time.Second)
				}
				at := s.StartTime.Add(time.Duration(deadline) * time.Second)
				late := c.FinishedAt.Sub(at)
				t.Logf("deadline %ds: container stopped %v after the deadline", deadline, late)
				if late > 1500*time.Millisecond {
					t.Errorf("container stopped %v after the deadline, want at most 1.5s", late)
				}
			}
			if !found {
				t.Fatal("container c0 never created")
			}
		})
	}
}
