package podruntime

import (
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

func TestSyncResultOnlyStarts(t *testing.T) {
	ok := func(a SyncAction) ActionResult { return ActionResult{Action: a, Target: "x"} }
	failed := func(a SyncAction, err error) ActionResult { return ActionResult{Action: a, Target: "x", Err: err} }
	for _, tc := range []struct {
		name    string
		results []ActionResult
		want    bool
	}{
		{"nothing done", nil, false},
		{"sandbox and container", []ActionResult{ok(ActionCreatePodSandbox), ok(ActionStartContainer)}, true},
		{"a container", []ActionResult{ok(ActionStartContainer)}, true},
		{"a start and a back-off", []ActionResult{ok(ActionStartContainer), failed(ActionStartContainer, ErrCrashLoopBackOff)}, true},
		{"only back-offs", []ActionResult{failed(ActionStartContainer, ErrImagePullBackOff)}, false},
		{"a failed start", []ActionResult{ok(ActionCreatePodSandbox), failed(ActionStartContainer, ErrCreateContainer)}, false},
		{"a failed sandbox", []ActionResult{failed(ActionCreatePodSandbox, ErrCreatePodSandbox)}, false},
		{"a kill", []ActionResult{ok(ActionKillContainer), ok(ActionStartContainer)}, false},
		{"a removal", []ActionResult{ok(ActionRemoveContainer)}, false},
		{"a resize", []ActionResult{ok(ActionResizePod), ok(ActionStartContainer)}, false},
		{"an unclassified error", []ActionResult{ok(ActionStartContainer), failed(ActionStartContainer, errors.New("boom"))}, false},
	} {
		if got := (SyncResult{Results: tc.results}).OnlyStarts(); got != tc.want {
			t.Errorf("%s: OnlyStarts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSyncResultShownIn(t *testing.T) {
	r := SyncResult{
		Results:    []ActionResult{{Action: ActionCreatePodSandbox, Target: "s1"}, {Action: ActionStartContainer, Target: "a"}, {Action: ActionStartContainer, Target: "b"}},
		sandboxes:  []string{"s1"},
		containers: []*runtimeapi.Container{{Id: "a", PodSandboxId: "s1"}, {Id: "b", PodSandboxId: "s1"}},
	}
	sb := func(ids ...string) []*runtimeapi.PodSandboxStatus {
		var out []*runtimeapi.PodSandboxStatus
		for _, id := range ids {
			out = append(out, &runtimeapi.PodSandboxStatus{Id: id})
		}
		return out
	}
	c := func(id string, s runtime.ContainerState) *runtime.ContainerStatus {
		return &runtime.ContainerStatus{ID: id, SandboxID: "s1", State: s}
	}
	for _, tc := range []struct {
		name string
		st   *runtime.PodStatus
		want bool
	}{
		{"empty", &runtime.PodStatus{}, false},
		{"the sandbox only", &runtime.PodStatus{SandboxStatuses: sb("s1")}, false},
		{"one container created", &runtime.PodStatus{SandboxStatuses: sb("s1"), ContainerStatuses: []*runtime.ContainerStatus{c("a", runtime.ContainerStateRunning), c("b", runtime.ContainerStateCreated)}}, false},
		{"all running", &runtime.PodStatus{SandboxStatuses: sb("s0", "s1"), ContainerStatuses: []*runtime.ContainerStatus{c("a", runtime.ContainerStateRunning), c("b", runtime.ContainerStateRunning), c("old", runtime.ContainerStateExited)}}, true},
		{"one exited already", &runtime.PodStatus{SandboxStatuses: sb("s1"), ContainerStatuses: []*runtime.ContainerStatus{c("a", runtime.ContainerStateExited), c("b", runtime.ContainerStateRunning)}}, true},
		{"one unknown", &runtime.PodStatus{SandboxStatuses: sb("s1"), ContainerStatuses: []*runtime.ContainerStatus{c("a", runtime.ContainerStateUnknown), c("b", runtime.ContainerStateRunning)}}, false},
		{"another sandbox", &runtime.PodStatus{SandboxStatuses: sb("s2"), ContainerStatuses: []*runtime.ContainerStatus{c("a", runtime.ContainerStateRunning), c("b", runtime.ContainerStateRunning)}}, false},
	} {
		if got := r.ShownIn(tc.st); got != tc.want {
			t.Errorf("%s: ShownIn = %v, want %v", tc.name, got, tc.want)
		}
	}
}
