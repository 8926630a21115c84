package podruntime

import (
	"context"
	"os"
	"testing"

	"github.com/nodekit/nodekit/runtime"
)

// cancellingStarts is a runtime whose StartContainer of the container
// named cancelAt cancels the sync's context while the container starts (a
// pod deleted during its start): the container runs, and the call
// returns the context's error, as a runtime that lost the race does.
type cancellingStarts struct {
	*recorder
	cancelAt string
	cancel   context.CancelFunc
}

func (r *cancellingStarts) StartContainer(ctx context.Context, id string) error {
	r.FakeRuntimeService.Lock()
	name := r.FakeRuntimeService.Containers[id].Metadata.Name
	r.FakeRuntimeService.Unlock()
	if name != r.cancelAt {
		return r.recorder.StartContainer(ctx, id)
	}
	if err := r.recorder.StartContainer(context.WithoutCancel(ctx), id); err != nil {
		return err
	}
	r.cancel()
	return ctx.Err()
}

// TestSyncPodCancelledStartCleansUp: a sync whose context ends while it
// starts the pod's containers (the pod was deleted) removes the container
// whose start it gave up, and the sandbox and log directory it made when
// no container of it started; what started before the cancellation stays,
// for the pod's termination to stop.
func TestSyncPodCancelledStartCleansUp(t *testing.T) {
	for _, tc := range []struct {
		name           string
		containers     []string
		cancelAt       string
		wantContainers []string
		wantSandbox    bool
	}{
		{"the only container", []string{"a"}, "a", nil, false},
		{"the second container", []string{"a", "b"}, "b", []string{"a"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t, Options{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rs := &cancellingStarts{recorder: f.rec, cancelAt: tc.cancelAt, cancel: cancel}
			m, err := New(rs, f.is, f.m.opts)
			if err != nil {
				t.Fatal(err)
			}
			pod := testPod("web", tc.containers...)
			res := m.SyncPodWithOptions(ctx, pod, nil, SyncPodOptions{})
			if res.Err() == nil {
				t.Fatal("SyncPod succeeded, want the cancelled start's error")
			}
			var names []string
			f.rs.Lock()
			for _, c := range f.rs.Containers {
				names = append(names, c.Metadata.Name)
			}
			sandboxes := len(f.rs.Sandboxes)
			f.rs.Unlock()
			if len(names) != len(tc.wantContainers) || (len(names) > 0 && names[0] != tc.wantContainers[0]) {
				t.Errorf("containers left %v, want %v", names, tc.wantContainers)
			}
			if want := map[bool]int{true: 1}[tc.wantSandbox]; sandboxes != want {
				t.Errorf("%d sandboxes left, want %d", sandboxes, want)
			}
			logDir := runtime.PodLogsDirectory(f.dir, pod.Namespace, pod.Name, pod.UID)
			if _, err := os.Stat(logDir); (err == nil) != tc.wantSandbox {
				t.Errorf("the pod's log directory: stat error %v, want it kept: %v", err, tc.wantSandbox)
			}
			for _, r := range res.Results {
				if r.Action == ActionStartContainer && r.Target == tc.cancelAt && r.Err == nil {
					t.Errorf("the cancelled start of %s reports no error", tc.cancelAt)
				}
			}
		})
	}
}
