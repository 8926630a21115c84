package podmodel

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func runningStatus(name string, started bool) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Started: &started, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func terminatedStatus(name string, code int32, reason string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}
}

func waitingStatus(name string, last *v1.ContainerStateTerminated) v1.ContainerStatus {
	s := v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	if last != nil {
		s.LastTerminationState.Terminated = last
	}
	return s
}

// TestPhase holds cases of the kubelet's getPhase (v1.37).
func TestPhase(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	never := v1.ContainerRestartPolicyNever
	onFailure := v1.ContainerRestartPolicyOnFailure
	pod := func(policy v1.RestartPolicy, inits []v1.Container, apps ...v1.Container) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{RestartPolicy: policy, InitContainers: inits, Containers: apps}}
	}
	c := func(name string, p *v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) v1.Container {
		return v1.Container{Name: name, RestartPolicy: p, RestartPolicyRules: rules}
	}
	rule := func(a v1.ContainerRestartRuleAction, codes ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: a, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}
	}
	tests := []struct {
		name        string
		pod         *v1.Pod
		init, apps  []v1.ContainerStatus
		initialized bool
		want        v1.PodPhase
	}{
		{
			name: "regular init container running with an app container present: Pending",
			pod:  pod(v1.RestartPolicyAlways, []v1.Container{c("i", nil)}, c("a", nil)),
			init: []v1.ContainerStatus{runningStatus("i", true)},
			apps: []v1.ContainerStatus{runningStatus("a", true)},
			want: v1.PodPending,
		},
		{
			name: "sidecar not started, pod not initialized: Pending",
			pod:  pod(v1.RestartPolicyAlways, []v1.Container{c("s", &always)}, c("a", nil)),
			init: []v1.ContainerStatus{runningStatus("s", false)},
			apps: []v1.ContainerStatus{waitingStatus("a", nil)},
			want: v1.PodPending,
		},
		{
			name:        "sidecar restarting in an initialized pod: Running",
			pod:         pod(v1.RestartPolicyAlways, []v1.Container{c("s", &always)}, c("a", nil)),
			init:        []v1.ContainerStatus{runningStatus("s", false)},
			apps:        []v1.ContainerStatus{runningStatus("a", true)},
			initialized: true,
			want:        v1.PodRunning,
		},
		{
			name: "failed init container under Never: Failed",
			pod:  pod(v1.RestartPolicyNever, []v1.Container{c("i", nil)}, c("a", nil)),
			init: []v1.ContainerStatus{terminatedStatus("i", 1, "Error")},
			want: v1.PodFailed,
		},
		{
			name: "failed init container with restartPolicy OnFailure under Never: Pending",
			pod:  pod(v1.RestartPolicyNever, []v1.Container{c("i", &onFailure)}, c("a", nil)),
			init: []v1.ContainerStatus{waitingStatus("i", &v1.ContainerStateTerminated{ExitCode: 1})},
			apps: []v1.ContainerStatus{waitingStatus("a", nil)},
			want: v1.PodPending,
		},
		{
			name: "failed init container with restartPolicy Never under Always: Failed",
			pod:  pod(v1.RestartPolicyAlways, []v1.Container{c("i", &never)}, c("a", nil)),
			init: []v1.ContainerStatus{terminatedStatus("i", 1, "Error")},
			want: v1.PodFailed,
		},
		{
			name: "all exited, a rule restarts one: Running",
			pod:  pod(v1.RestartPolicyNever, nil, c("a", &never, rule(v1.ContainerRestartRuleActionRestart, 42)), c("b", nil)),
			apps: []v1.ContainerStatus{terminatedStatus("a", 42, "Error"), terminatedStatus("b", 0, "Completed")},
			want: v1.PodRunning,
		},
		{
			name: "all exited, no rule matches: Failed",
			pod:  pod(v1.RestartPolicyNever, nil, c("a", &never, rule(v1.ContainerRestartRuleActionRestart, 42)), c("b", nil)),
			apps: []v1.ContainerStatus{terminatedStatus("a", 1, "Error"), terminatedStatus("b", 0, "Completed")},
			want: v1.PodFailed,
		},
		{
			name: "all exited under OnFailure, all succeeded: Succeeded",
			pod:  pod(v1.RestartPolicyOnFailure, nil, c("a", nil)),
			apps: []v1.ContainerStatus{terminatedStatus("a", 0, "Completed")},
			want: v1.PodSucceeded,
		},
		{
			name: "removed for RestartAllContainers: restarting whatever the policy, Running",
			pod:  pod(v1.RestartPolicyNever, nil, c("a", &never, rule(v1.ContainerRestartRuleActionRestartAllContainers, 7))),
			apps: []v1.ContainerStatus{waitingStatus("a", &v1.ContainerStateTerminated{ExitCode: 137, Reason: ReasonRestartingAllContainers})},
			want: v1.PodRunning,
		},
		{
			name: "exited with a RestartAllContainers rule: restarting, Running",
			pod:  pod(v1.RestartPolicyNever, nil, c("a", &never, rule(v1.ContainerRestartRuleActionRestartAllContainers, 7))),
			apps: []v1.ContainerStatus{terminatedStatus("a", 7, "Error")},
			want: v1.PodRunning,
		},
		{
			name: "a container without status: Pending",
			pod:  pod(v1.RestartPolicyAlways, nil, c("a", nil), c("b", nil)),
			apps: []v1.ContainerStatus{runningStatus("a", true)},
			want: v1.PodPending,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &v1.PodStatus{InitContainerStatuses: tt.init, ContainerStatuses: tt.apps}
			if got := Phase(tt.pod, s, false, tt.initialized); got != tt.want {
				t.Errorf("Phase = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestReadinessNeedsReconcile(t *testing.T) {
	running := []v1.ContainerStatus{{Name: "c", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	pod := func(gates bool, conds ...v1.PodCondition) *v1.Pod {
		p := &v1.Pod{
			Spec:   v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: running, Conditions: conds},
		}
		if gates {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
		}
		return p
	}
	gate := func(s v1.ConditionStatus) v1.PodCondition {
		return v1.PodCondition{Type: "example.com/gate", Status: s}
	}
	missing := `corresponding condition of pod readiness gate "example.com/gate" does not exist.`
	notReady := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReasonReadinessGatesNotReady, Message: missing}
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no gates", pod(false, ready), false},
		{"no Ready condition yet", pod(true, gate(v1.ConditionTrue)), false},
		{"gate missing, not Ready", pod(true, notReady), false},
		{"gate set True by another writer", pod(true, notReady, gate(v1.ConditionTrue)), true},
		{"gate set False while Ready", pod(true, ready, gate(v1.ConditionFalse)), true},
		{"gate True and Ready", pod(true, ready, gate(v1.ConditionTrue)), false},
		{"gate False, message differs", pod(true, notReady, gate(v1.ConditionFalse)), true},
	} {
		if got := ReadinessNeedsReconcile(tc.pod); got != tc.want {
			t.Errorf("%s: ReadinessNeedsReconcile = %v, want %v", tc.name, got, tc.want)
		}
	}
}
