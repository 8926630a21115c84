package pleg

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// TestCacheNotRunning: the containers and sandboxes of the pods with a
// container not running or a sandbox not ready, as the runtime lists them;
// a pod whose containers all run in ready sandboxes is left out; a cache
// not refreshed since, or holding a failed read, does not answer.
func TestCacheNotRunning(t *testing.T) {
	sandbox := func(id, uid string, state runtimeapi.PodSandboxState, created int64) *runtimeapi.PodSandboxStatus {
		return &runtimeapi.PodSandboxStatus{Id: id, State: state, CreatedAt: created,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + uid, Namespace: "ns", Uid: uid}}
	}
	pod := func(uid string, sbs []*runtimeapi.PodSandboxStatus, cs ...*runtime.ContainerStatus) *runtime.PodStatus {
		return &runtime.PodStatus{ID: types.UID(uid), Name: "p-" + uid, Namespace: "ns", SandboxStatuses: sbs, ContainerStatuses: cs}
	}
	c := NewCache()
	c.Set("running", pod("running", []*runtimeapi.PodSandboxStatus{sandbox("s1", "running", runtimeapi.PodSandboxState_SANDBOX_READY, 1)},
		&runtime.ContainerStatus{ID: "c1", Name: "app", SandboxID: "s1", State: runtime.ContainerStateRunning, CreatedAt: at(1)}), nil, at(10))
	c.Set("dead", pod("dead", []*runtimeapi.PodSandboxStatus{
		sandbox("s3", "dead", runtimeapi.PodSandboxState_SANDBOX_READY, 3),
		sandbox("s2", "dead", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 2),
	},
		&runtime.ContainerStatus{ID: "c3", Name: "app", SandboxID: "s3", State: runtime.ContainerStateRunning, CreatedAt: at(3)},
		&runtime.ContainerStatus{ID: "c2", Name: "app", SandboxID: "s2", State: runtime.ContainerStateExited, CreatedAt: at(2)}), nil, at(10))
	if _, _, ok := c.NotRunning(at(10)); ok {
		t.Fatal("NotRunning answered from a cache never refreshed")
	}
	c.UpdateTime(at(10))
	cs, sbs, ok := c.NotRunning(at(10))
	if !ok {
		t.Fatal("NotRunning did not answer from a current cache")
	}
	labels := func(name string) map[string]string {
		return map[string]string{runtime.LabelPodUID: "dead", runtime.LabelContainerName: name}
	}
	wantCs := []*runtimeapi.Container{
		{Id: "c2", PodSandboxId: "s2", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: labels("app"),
			Image: &runtimeapi.ImageSpec{}, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: at(2).UnixNano()},
		{Id: "c3", PodSandboxId: "s3", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: labels("app"),
			Image: &runtimeapi.ImageSpec{}, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: at(3).UnixNano()},
	}
	if diff := cmp.Diff(wantCs, cs, protocmp.Transform()); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	wantSbs := []*runtimeapi.PodSandbox{
		{Id: "s2", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-dead", Namespace: "ns", Uid: "dead"}, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 2},
		{Id: "s3", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-dead", Namespace: "ns", Uid: "dead"}, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 3},
	}
	if diff := cmp.Diff(wantSbs, sbs, protocmp.Transform()); diff != "" {
		t.Errorf("sandboxes (-want +got):\n%s", diff)
	}
	if _, _, ok := c.NotRunning(at(11)); ok {
		t.Error("NotRunning answered from a cache older than asked")
	}
	c.Set("failed", nil, errors.New("cannot read"), at(12))
	c.UpdateTime(at(12))
	if _, _, ok := c.NotRunning(at(12)); ok {
		t.Error("NotRunning answered from a cache holding a failed read")
	}
}
