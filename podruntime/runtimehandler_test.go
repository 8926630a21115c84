package podruntime

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// TestPodRuntimeHandler: a pod with a RuntimeClass gets its sandbox with
// the class's handler; one without, or with no PodRuntimeHandler, the
// manager's RuntimeHandler; a look-up error fails the sandbox with a
// FailedCreatePodSandBox event and reaches no runtime.
func TestPodRuntimeHandler(t *testing.T) {
	classes := map[string]string{"fast": "runc-fast"}
	lookup := func(pod *v1.Pod) (string, error) {
		h, ok := classes[*pod.Spec.RuntimeClassName]
		if !ok {
			return "", errors.New(`runtimeclasses.node.k8s.io "` + *pod.Spec.RuntimeClassName + `" not found`)
		}
		return h, nil
	}
	tests := []struct {
		name        string
		class       *string
		lookup      func(*v1.Pod) (string, error)
		wantHandler string // "" with wantEvent: no sandbox
		wantEvent   string
	}{
		{name: "no class", lookup: lookup, wantHandler: "default"},
		{name: "empty class", class: ptr(""), lookup: lookup, wantHandler: "default"},
		{name: "class", class: ptr("fast"), lookup: lookup, wantHandler: "runc-fast"},
		{name: "no look-up", class: ptr("fast"), wantHandler: "default"},
		{name: "missing class", class: ptr("gone"), lookup: lookup,
			wantEvent: `Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclasses.node.k8s.io "gone" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			f := newFakes(t, Options{RuntimeHandler: "default", PodRuntimeHandler: tt.lookup, Recorder: rec})
			pod := testPod("rc", "a")
			pod.Spec.RuntimeClassName = tt.class
			res := f.sync(t, pod)
			var handlers []string
			f.rs.Lock()
			for _, s := range f.rs.Sandboxes {
				handlers = append(handlers, s.RuntimeHandler)
			}
			f.rs.Unlock()
			events := drain(rec)
			if tt.wantEvent != "" {
				if res.Err() == nil || !errors.Is(res.Err(), ErrCreatePodSandbox) {
					t.Errorf("sync error %v, want ErrCreatePodSandbox", res.Err())
				}
				if len(handlers) != 0 {
					t.Errorf("sandboxes created with %q, want none", handlers)
				}
				if diff := cmp.Diff([]string{tt.wantEvent}, events); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				return
			}
			if err := res.Err(); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if diff := cmp.Diff([]string{tt.wantHandler}, handlers); diff != "" {
				t.Errorf("sandbox handlers (-want +got):\n%s", diff)
			}
		})
	}
}
