package podruntime

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

func sandboxStatus(id string, ready bool, attempt uint32, ip string, mode runtimeapi.NamespaceMode) *runtimeapi.PodSandboxStatus {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandboxStatus{
		Id:       id,
		State:    st,
		Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt},
		Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		Linux:    &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: mode}}},
	}
}

func readySandbox() *runtimeapi.PodSandboxStatus {
	return sandboxStatus("sb1", true, 0, "10.0.0.1", runtimeapi.NamespaceMode_POD)
}

// cs makes a container status whose hash matches the container's spec in
// pod (or "stale" when the pod has no such container).
func cs(pod *v1.Pod, name string, state runtime.ContainerState, exit int32) *runtime.ContainerStatus {
	hash := "stale"
	if c := podmodel.FindContainer(pod, name); c != nil {
		hash = runtime.HashContainer(c)
	}
	return &runtime.ContainerStatus{ID: name + "-id", Name: name, State: state, ExitCode: exit, Hash: hash, SandboxID: "sb1"}
}

func withInit(pod *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "init:v1"})
	}
	return pod
}

func withPolicy(pod *v1.Pod, p v1.RestartPolicy) *v1.Pod {
	pod.Spec.RestartPolicy = p
	return pod
}

func TestComputePodActions(t *testing.T) {
	basic := func() *v1.Pod { return testPod("p", "a", "b") }
	hostNet := func() *v1.Pod {
		p := basic()
		p.Spec.HostNetwork = true
		return p
	}
	changed := func() *v1.Pod {
		p := basic()
		p.Spec.Containers[0].Image = "busybox:1.37"
		return p
	}
	sidecar := func() *v1.Pod {
		p := withInit(basic(), "side")
		p.Spec.InitContainers[0].RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
		return p
	}
	deleted := func() *v1.Pod {
		p := basic()
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		return p
	}
	noKill := []containerToKill(nil)

	tests := []struct {
		name      string
		pod       *v1.Pod
		status    func(pod *v1.Pod) *runtime.PodStatus
		unhealthy UnhealthyFunc
		want      podActions
	}{
		{
			name:   "no sandbox: create it and start every container",
			pod:    basic(),
			status: func(*v1.Pod) *runtime.PodStatus { return &runtime.PodStatus{} },
			want:   podActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}},
		},
		{
			name:   "no sandbox with init containers: start the first init container only",
			pod:    withInit(basic(), "i1", "i2"),
			status: func(*v1.Pod) *runtime.PodStatus { return &runtime.PodStatus{} },
			want:   podActions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}},
		},
		{
			name: "sandbox not ready: kill, recreate with the next attempt, start all",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 2, "", runtimeapi.NamespaceMode_POD)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 3, ContainersToStart: []int{0, 1}},
		},
		{
			name: "more than one ready sandbox: recreate",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox(), sandboxStatus("sb0", true, 0, "10.0.0.2", runtimeapi.NamespaceMode_POD)}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}},
		},
		{
			name: "host network mode changed: recreate",
			pod:  hostNet(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, Attempt: 1, ContainersToStart: []int{0, 1}},
		},
		{
			name: "pod network sandbox without IP: recreate",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", true, 0, "", runtimeapi.NamespaceMode_POD)}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}},
		},
		{
			name: "host network sandbox without IP: keep it",
			pod:  hostNet(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", true, 0, "", runtimeapi.NamespaceMode_NODE)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "restartPolicy Never, dead sandbox that ran containers: only kill",
			pod:  withPolicy(basic(), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 0, "", runtimeapi.NamespaceMode_POD)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 1)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1", Attempt: 1},
		},
		{
			name: "restartPolicy Never, dead sandbox that never ran a container: retry the sandbox",
			pod:  withPolicy(basic(), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 0, "", runtimeapi.NamespaceMode_POD)}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}},
		},
		{
			name: "restartPolicy OnFailure, dead sandbox: restart only the failed container",
			pod:  withPolicy(basic(), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 0, "", runtimeapi.NamespaceMode_POD)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 2)}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{1}},
		},
		{
			name: "restartPolicy OnFailure, dead sandbox, all succeeded: no new sandbox",
			pod:  withPolicy(basic(), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 0, "", runtimeapi.NamespaceMode_POD)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1", Attempt: 1},
		},
		{
			name: "all running: nothing to do",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToKill: noKill},
		},
		{
			name: "init: first running, wait",
			pod:  withInit(basic(), "i1", "i2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "init: first succeeded, start the second",
			pod:  withInit(basic(), "i1", "i2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{1}},
		},
		{
			name: "init: first failed, restart it (Always)",
			pod:  withInit(basic(), "i1", "i2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateExited, 1)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			name: "init: OOM-killed is failed and restarted (OnFailure)",
			pod:  withPolicy(withInit(basic(), "i1", "i2"), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				s := cs(p, "i1", runtime.ContainerStateExited, 137)
				s.Reason = "OOMKilled"
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()}, ContainerStatuses: []*runtime.ContainerStatus{s}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			// The kubelet (ContainerRestartRules) asks the restart policy with
			// the exit code: OnFailure does not restart an exit code 0, so
			// the failed initialization fails the pod.
			name: "init: OOM-killed with exit code 0 under OnFailure fails the pod",
			pod:  withPolicy(withInit(basic(), "i1", "i2"), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				s := cs(p, "i1", runtime.ContainerStateExited, 0)
				s.Reason = "OOMKilled"
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()}, ContainerStatuses: []*runtime.ContainerStatus{s}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "init: failed under Never fails the pod",
			pod:  withPolicy(withInit(basic(), "i1", "i2"), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateExited, 1)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "init: unknown state is killed before the restart",
			pod:  withInit(basic(), "i1"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateUnknown, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}, ContainersToKill: []containerToKill{{
				ID: "i1-id", Name: "i1", Container: &withInit(basic(), "i1").Spec.InitContainers[0], Reason: killUnknown, Message: `Init container is in "unknown" state, try killing it before restart`,
			}}},
		},
		{
			name: "init: all succeeded, start the app containers",
			pod:  withInit(basic(), "i1", "i2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i2", runtime.ContainerStateExited, 0), cs(p, "i1", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0, 1}},
		},
		{
			name: "init: app container running means initialized even if init containers are gone",
			pod:  withInit(basic(), "i1"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{1}},
		},
		{
			name: "sidecar not started: start it first",
			pod:  sidecar(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			name: "sidecar running: the next init container starts",
			pod:  withInit(sidecar(), "i2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "side", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{1}},
		},
		{
			name: "sidecar running, init done: app containers start",
			pod:  sidecar(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "side", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0, 1}},
		},
		{
			name: "sidecar exited before initialization: restarted even under Never",
			pod:  withPolicy(withInit(sidecar(), "i2"), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "side", runtime.ContainerStateExited, 1)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			name: "sidecar exited after initialization: restarted beside the app containers",
			pod:  sidecar(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "side", runtime.ContainerStateExited, 1), cs(p, "b", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}, ContainersToStart: []int{1}},
		},
		{
			name: "sidecar alone does not keep a finished pod alive",
			pod:  withPolicy(sidecar(), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "side", runtime.ContainerStateRunning, 0), cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "sidecar pod finished, sandbox dead: no new sandbox",
			pod:  withPolicy(sidecar(), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 0, "", runtimeapi.NamespaceMode_POD)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "side", runtime.ContainerStateExited, 137), cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1", Attempt: 1},
		},
		{
			name: "Always: exited containers restart",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}},
		},
		{
			name: "OnFailure: failed restarts, succeeded does not",
			pod:  withPolicy(basic(), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 3)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{1}},
		},
		{
			name: "OnFailure: all succeeded, kill the pod (stop the sandbox)",
			pod:  withPolicy(basic(), v1.RestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "Never: exited containers stay exited",
			pod:  withPolicy(basic(), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 1), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "never started and created containers start",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "b", runtime.ContainerStateCreated, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0, 1}},
		},
		{
			name: "unknown state: kill and start again",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateUnknown, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: []containerToKill{{
				ID: "a-id", Name: "a", Container: &basic().Spec.Containers[0], Reason: killUnknown,
				Message: `Container is in "unknown" state, try killing it before restart`,
			}}},
		},
		{
			name: "spec hash changed: kill and restart",
			pod:  changed(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				old := basic()
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(old, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: []containerToKill{{
				ID: "a-id", Name: "a", Container: &changed().Spec.Containers[0], Reason: killSpecChanged,
				Message: "Container a definition changed, will be restarted",
			}}},
		},
		{
			name: "spec hash changed under Never: still replaced",
			pod:  withPolicy(changed(), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				old := basic()
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(old, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: []containerToKill{{
				ID: "a-id", Name: "a", Container: &withPolicy(changed(), v1.RestartPolicyNever).Spec.Containers[0], Reason: killSpecChanged,
				Message: "Container a definition changed, will be restarted",
			}}},
		},
		{
			name: "resources change alone does not replace the container",
			pod: func() *v1.Pod {
				p := basic()
				p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: mustQuantity("64Mi")}
				return p
			}(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				old := basic()
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(old, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "container no longer in the spec: killed",
			pod:  testPod("p", "a"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "gone", runtime.ContainerStateRunning, 0), cs(p, "old", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToKill: []containerToKill{{
				ID: "gone-id", Name: "gone", Reason: killRemoved, Message: "Container gone is not in the pod spec",
			}}},
		},
		{
			name: "liveness failure: kill and restart (Always)",
			pod:  basic(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			unhealthy: func(id string) string {
				if id == "b-id" {
					return "liveness"
				}
				return ""
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{1}, ContainersToKill: []containerToKill{{
				ID: "b-id", Name: "b", Container: &basic().Spec.Containers[1], Reason: killLiveness,
				Message: "Container b failed liveness probe, will be restarted",
			}}},
		},
		{
			name: "startup failure under Never: kill without restart; nothing left kills the pod",
			pod:  withPolicy(testPod("p", "a"), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			unhealthy: func(string) string { return "startup" },
			want: podActions{KillPod: true, SandboxID: "sb1", ContainersToKill: []containerToKill{{
				ID: "a-id", Name: "a", Container: &withPolicy(testPod("p", "a"), v1.RestartPolicyNever).Spec.Containers[0], Reason: killStartup,
				Message: "Container a failed startup probe",
			}}},
		},
		{
			name: "deleted pod: exited containers are not restarted",
			pod:  deleted(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 1), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.status(tt.pod), SyncPodOptions{Unhealthy: tt.unhealthy})
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []int) bool { return cmp.Equal(emptyNil(a), emptyNil(b)) }),
				cmp.Comparer(func(a, b []containerToKill) bool {
					if len(a) == 0 && len(b) == 0 {
						return true
					}
					return cmp.Equal(a, b, cmp.AllowUnexported(v1.Container{}))
				})); diff != "" {
				t.Errorf("computePodActions (-want +got):\n%s", diff)
			}
		})
	}
}

func emptyNil(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestHashContainer(t *testing.T) {
	c := v1.Container{Name: "a", Image: "busybox:1.36", Command: []string{"sh"}}
	h := runtime.HashContainer(&c)
	if h != runtime.HashContainer(c.DeepCopy()) {
		t.Fatal("hash is not stable")
	}
	withRes := c.DeepCopy()
	withRes.Resources.Requests = v1.ResourceList{v1.ResourceCPU: mustQuantity("100m")}
	if runtime.HashContainer(withRes) != h {
		t.Error("resources changed the hash")
	}
	other := c.DeepCopy()
	other.Args = []string{"-c", "true"}
	if runtime.HashContainer(other) == h {
		t.Error("args did not change the hash")
	}
}
