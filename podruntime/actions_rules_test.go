package podruntime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// sidecarPod has init containers [s1 sidecar, i2 regular, s3 sidecar] and
// app containers a and b.
func sidecarPod() *v1.Pod {
	p := withInit(testPod("p", "a", "b"), "s1", "i2", "s3")
	p.Spec.InitContainers[0].RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
	p.Spec.InitContainers[2].RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
	return p
}

func inSandbox(s *runtime.ContainerStatus, sandbox string) *runtime.ContainerStatus {
	s.SandboxID = sandbox
	return s
}

func exitRule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// TestComputePodActionsKubeletRules holds the kubelet v1.37 rules for
// initialization in the current sandbox, sidecar start order and
// container-level restart policies and rules.
func TestComputePodActionsKubeletRules(t *testing.T) {
	ready := func() []*runtimeapi.PodSandboxStatus {
		return []*runtimeapi.PodSandboxStatus{readySandbox(), sandboxStatus("sb0", false, 0, "", runtimeapi.NamespaceMode_POD)}
	}
	withStartup := func() *v1.Pod {
		p := sidecarPod()
		p.Spec.InitContainers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		return p
	}
	policy := func(p *v1.Pod, name string, rp v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
		for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range list {
				if list[i].Name == name {
					list[i].RestartPolicy = ptr(rp)
					list[i].RestartPolicyRules = rules
				}
			}
		}
		return p
	}
	tests := []struct {
		name   string
		pod    *v1.Pod
		status func(p *v1.Pod) *runtime.PodStatus
		opts   SyncPodOptions
		want   podActions
	}{
		{
			name: "stale Created app container of an old sandbox does not count as initialized: start init 0 only",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					inSandbox(cs(p, "a", runtime.ContainerStateCreated, 0), "sb0")}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			name: "regular init container running with an old sandbox's app container: wait",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "i2", runtime.ContainerStateRunning, 0), cs(p, "s1", runtime.ContainerStateRunning, 0),
					inSandbox(cs(p, "a", runtime.ContainerStateExited, 0), "sb0")}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "sidecar running: the regular init container after it starts",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "s1", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{1}},
		},
		{
			name: "sidecar with a startup probe not yet succeeded: wait",
			pod:  withStartup(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "s1", runtime.ContainerStateRunning, 0)}}
			},
			opts: SyncPodOptions{Started: func(string) bool { return false }},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "sidecar whose startup probe succeeded: the next init container starts",
			pod:  withStartup(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "s1", runtime.ContainerStateRunning, 0)}}
			},
			opts: SyncPodOptions{Started: func(id string) bool { return id == "s1-id" }},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{1}},
		},
		{
			name: "sidecar failed its startup probe: killed and started again",
			pod:  withStartup(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "s1", runtime.ContainerStateRunning, 0)}}
			},
			opts: SyncPodOptions{Unhealthy: func(string) string { return "startup" }, Started: func(string) bool { return false }},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}, ContainersToKill: []containerToKill{{
				ID: "s1-id", Name: "s1", Container: &withStartup().Spec.InitContainers[0], Reason: killStartup, Message: "Init container s1 failed startup probe"}}},
		},
		{
			name: "regular init container done: the last sidecar starts",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "i2", runtime.ContainerStateExited, 0), cs(p, "s1", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{2}},
		},
		{
			name: "last init container (a sidecar) runs: app containers start in the same sync",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "s3", runtime.ContainerStateRunning, 0), cs(p, "i2", runtime.ContainerStateExited, 0), cs(p, "s1", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0, 1}},
		},
		{
			name: "every exited sidecar is restarted in one sync, beside the app containers",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateExited, 1),
					cs(p, "s3", runtime.ContainerStateExited, 1), cs(p, "s1", runtime.ContainerStateExited, 2)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0, 2}, ContainersToStart: []int{1}},
		},
		{
			name: "initialized pod: a sidecar removed from the runtime starts again, the regular init container does not",
			pod:  sidecarPod(),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0), cs(p, "s3", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			name: "container restartPolicy Never under pod Always: an exited container stays exited",
			pod:  policy(testPod("p", "a", "b"), "a", v1.ContainerRestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "a", runtime.ContainerStateExited, 1), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "container restartPolicy Always under pod Never: restarted",
			pod:  policy(withPolicy(testPod("p", "a", "b"), v1.RestartPolicyNever), "a", v1.ContainerRestartPolicyAlways),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}},
		},
		{
			name: "restart rule In [42] under container policy Never: exit 42 restarts",
			pod: policy(withPolicy(testPod("p", "a"), v1.RestartPolicyNever), "a", v1.ContainerRestartPolicyNever,
				exitRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 42)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}},
		},
		{
			name: "restart rule In [42] under container policy Never: exit 1 does not, the pod is done",
			pod: policy(withPolicy(testPod("p", "a"), v1.RestartPolicyNever), "a", v1.ContainerRestartPolicyNever,
				exitRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 1)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "restart rule NotIn [0] under container policy Always: exit 0 falls back to Always",
			pod: policy(testPod("p", "a"), "a", v1.ContainerRestartPolicyAlways,
				exitRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{SandboxID: "sb1", ContainersToStart: []int{0}},
		},
		{
			name: "failed init container with restartPolicy OnFailure under pod Never: restarted, not a failed pod",
			pod:  policy(withPolicy(withInit(testPod("p", "a"), "i1"), v1.RestartPolicyNever), "i1", v1.ContainerRestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateExited, 3)}}
			},
			want: podActions{SandboxID: "sb1", InitContainersToStart: []int{0}},
		},
		{
			name: "failed init container with restartPolicy Never under pod Always: the pod fails",
			pod:  policy(withInit(testPod("p", "a"), "i1"), "i1", v1.ContainerRestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateExited, 3)}}
			},
			want: podActions{KillPod: true, SandboxID: "sb1"},
		},
		{
			name: "liveness failure of a container with restartPolicy Never: killed, not restarted",
			pod:  policy(testPod("p", "a", "b"), "a", v1.ContainerRestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "a", runtime.ContainerStateRunning, 0), cs(p, "b", runtime.ContainerStateRunning, 0)}}
			},
			opts: SyncPodOptions{Unhealthy: func(id string) string {
				if id == "a-id" {
					return "liveness"
				}
				return ""
			}},
			want: podActions{SandboxID: "sb1", ContainersToKill: []containerToKill{{
				ID: "a-id", Name: "a", Container: &policy(testPod("p", "a", "b"), "a", v1.ContainerRestartPolicyNever).Spec.Containers[0],
				Reason: killLiveness, Message: "Container a failed liveness probe"}}},
		},
		{
			name: "new sandbox: a succeeded container with restartPolicy OnFailure is not started again",
			pod:  policy(testPod("p", "a", "b"), "a", v1.ContainerRestartPolicyOnFailure),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandboxStatus("sb1", false, 0, "", runtimeapi.NamespaceMode_POD)},
					ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateExited, 0), cs(p, "b", runtime.ContainerStateExited, 1)}}
			},
			want: podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{1}},
		},
		{
			name: "RestartAllContainers: every instance removed, the others first, the triggering container last",
			pod: policy(withInit(testPod("p", "a", "b"), "i1"), "a", v1.ContainerRestartPolicyNever,
				exitRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 7)),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "a", runtime.ContainerStateExited, 7), cs(p, "b", runtime.ContainerStateRunning, 0), cs(p, "i1", runtime.ContainerStateExited, 0)}}
			},
			opts: SyncPodOptions{RestartAllContainers: true},
			want: podActions{SandboxID: "sb1", ContainersToReset: []containerToReset{
				{ID: "b-id", Name: "b", Kill: true}, {ID: "i1-id", Name: "i1"}, {ID: "a-id", Name: "a"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.status(tt.pod), tt.opts)
			for _, r := range got.ContainersToReset {
				if r.Container == nil || r.Container.Name != r.Name {
					t.Errorf("reset %s: spec %v", r.Name, r.Container)
				}
			}
			if diff := cmp.Diff(tt.want, got,
				cmp.Comparer(func(a, b []int) bool { return cmp.Equal(emptyNil(a), emptyNil(b)) }),
				cmp.Comparer(func(a, b []containerToKill) bool {
					if len(a) == 0 && len(b) == 0 {
						return true
					}
					return cmp.Equal(a, b, cmp.AllowUnexported(v1.Container{}))
				}),
				cmpopts.IgnoreFields(containerToReset{}, "Container")); diff != "" {
				t.Errorf("computePodActions (-want +got):\n%s", diff)
			}
		})
	}
}
