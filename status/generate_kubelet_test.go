package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

func inSandbox(cs *runtime.ContainerStatus, id string) *runtime.ContainerStatus {
	cs.SandboxID = id
	return cs
}

func withContainerPolicy(pod *v1.Pod, name string, p v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy = &p
				list[i].RestartPolicyRules = rules
			}
		}
	}
	return pod
}

func restartAllOn(code int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{code}}}
}

func apiRunning(name, id string, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, ContainerID: id, RestartCount: restarts, Started: boolPtr(true), Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(50, 0))}}}
}

func apiTerminated(name, id string, restarts, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, ContainerID: id, RestartCount: restarts, Started: boolPtr(false),
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: "Error", ContainerID: id}}}
}

// TestGenerateKubeletRules holds the kubelet v1.37 rules for the API
// status that depend on the current sandbox, the previous API status and
// the container restart rules.
func TestGenerateKubeletRules(t *testing.T) {
	const (
		scheduled = "PodScheduled=True"
		rtscTrue  = "PodReadyToStartContainers=True"
		initTrue  = "Initialized=True"
		notReadyA = "ContainersNotReady containers with unready status: [a]"
	)
	oldSandbox := func(cs ...*runtime.ContainerStatus) *runtime.PodStatus {
		st := readyPodStatus(cs...)
		st.SandboxStatuses = append(st.SandboxStatuses, &runtimeapi.PodSandboxStatus{Id: "sb0", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY})
		return st
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		status   *runtime.PodStatus
		previous *v1.PodStatus
		want     statusSummary
	}{
		{
			name:   "regular init container running beside an old sandbox's app container: Pending",
			pod:    withInit(testPod("p", "a"), "i1"),
			status: oldSandbox(inSandbox(running("i1", 0), "sb1"), inSandbox(exited("a", 0, 0), "sb0")),
			want: statusSummary{
				Phase:      v1.PodPending,
				Conditions: []string{rtscTrue, initTrue, "Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled},
				Init:       []string{"i1 running ready=false started=true restarts=0 id=cri://i1-0"},
				Containers: []string{"a terminated(0 Completed cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name: "sandbox without an IP: PodReadyToStartContainers False with the kubelet's reason",
			pod:  testPod("p", "a"),
			status: func() *runtime.PodStatus {
				st := readyPodStatus(running("a", 0))
				st.SandboxStatuses[0].Network.Ip = ""
				return st
			}(),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{"PodReadyToStartContainers=False PodSandboxNotReady pod sandbox has no IP address", initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
		{
			name: "sandbox not ready: PodReadyToStartContainers False",
			pod:  testPod("p", "a"),
			status: func() *runtime.PodStatus {
				st := readyPodStatus(exited("a", 0, 137))
				st.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				return st
			}(),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{"PodReadyToStartContainers=False PodSandboxNotReady pod sandbox is not ready", initTrue, "Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled},
				Containers: []string{"a terminated(137 Error cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "init container gone from the runtime after initialization: Terminated Completed",
			pod:    withInit(testPod("p", "a"), "i1"),
			status: readyPodStatus(inSandbox(running("a", 0), "sb1")),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Init:       []string{"i1 terminated(0 Completed ) ready=true started=false restarts=0 id="},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
		{
			name:     "restart count does not go down in a new sandbox",
			pod:      testPod("p", "a"),
			status:   readyPodStatus(running("a", 0)),
			previous: &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{apiRunning("a", "cri://old", 5)}},
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=5 id=cri://a-0"},
			},
		},
		{
			name:     "running again after a terminated instance the runtime forgot: one more restart, last state kept",
			pod:      testPod("p", "a"),
			status:   readyPodStatus(running("a", 0)),
			previous: &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{apiTerminated("a", "cri://old", 3, 2)}},
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=4 id=cri://a-0 last=terminated(2 Error cri://old)"},
			},
		},
		{
			name:   "a running container that vanished: last state ContainerStatusUnknown 137, one more restart",
			pod:    testPod("p", "a", "b"),
			status: readyPodStatus(running("b", 0)),
			previous: &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
				apiRunning("a", "cri://a-2", 2), apiRunning("b", "cri://b-0", 0)}},
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled},
				Containers: []string{"a waiting(ContainerCreating) ready=false started=false restarts=3 id= last=terminated(137 ContainerStatusUnknown )",
					"b running ready=true started=true restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "a running container in an unknown state: terminated ContainerStatusUnknown 137",
			pod:    testPod("p", "a"),
			status: readyPodStatus(&runtime.ContainerStatus{ID: "a-1", Name: "a", State: runtime.ContainerStateUnknown, RestartCount: 1}),
			previous: &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
				apiRunning("a", "cri://a-1", 1)}},
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled},
				Containers: []string{"a terminated(137 ContainerStatusUnknown ) ready=false started=false restarts=2 id=cri://a-1"},
			},
		},
		{
			name:   "a terminated container removed from the runtime stays terminated",
			pod:    withPolicy(testPod("p", "a"), v1.RestartPolicyNever),
			status: readyPodStatus(),
			previous: &v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
				apiTerminated("a", "cri://a-0", 0, 1)}},
			want: statusSummary{
				Phase:      v1.PodFailed,
				Conditions: []string{rtscTrue, initTrue, "Ready=False PodFailed", "ContainersReady=False PodFailed", scheduled},
				Containers: []string{"a terminated(1 Error cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:     "a terminal phase is kept",
			pod:      testPod("p", "a"),
			status:   readyPodStatus(running("a", 0)),
			previous: &v1.PodStatus{Phase: v1.PodFailed},
			want: statusSummary{
				Phase:      v1.PodFailed,
				Conditions: []string{rtscTrue, initTrue, "Ready=False PodFailed", "ContainersReady=False PodFailed", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "container restartPolicy Always under pod Never: exited 0 is restarting, Running",
			pod:    withContainerPolicy(withPolicy(testPod("p", "a"), v1.RestartPolicyNever), "a", v1.ContainerRestartPolicyAlways),
			status: readyPodStatus(exited("a", 0, 0)),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled},
				Containers: []string{"a terminated(0 Completed cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "container restartPolicy Never under pod Always: all exited, one failed: Failed",
			pod:    withContainerPolicy(withContainerPolicy(testPod("p", "a", "b"), "a", v1.ContainerRestartPolicyNever), "b", v1.ContainerRestartPolicyNever),
			status: readyPodStatus(exited("a", 0, 1), exited("b", 0, 0)),
			want: statusSummary{
				Phase:      v1.PodFailed,
				Conditions: []string{rtscTrue, initTrue, "Ready=False PodFailed", "ContainersReady=False PodFailed", scheduled},
				Containers: []string{"a terminated(1 Error cri://a-0) ready=false started=false restarts=0 id=cri://a-0",
					"b terminated(0 Completed cri://b-0) ready=false started=false restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "failed init container with restartPolicy OnFailure under pod Never: Pending, not Failed",
			pod:    withContainerPolicy(withPolicy(withInit(testPod("p", "a"), "i1"), v1.RestartPolicyNever), "i1", v1.ContainerRestartPolicyOnFailure),
			status: readyPodStatus(exited("i1", 0, 1)),
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{rtscTrue, "Initialized=False ContainersNotInitialized containers with incomplete status: [i1]",
					"Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled},
				Init:       []string{"i1 terminated(1 Error cri://i1-0) ready=false started=false restarts=0 id=cri://i1-0"},
				Containers: []string{"a waiting(PodInitializing) ready=false started=false restarts=0 id="},
			},
		},
		{
			name:   "app container statuses are listed by name",
			pod:    testPod("p", "b", "a"),
			status: readyPodStatus(running("a", 0), running("b", 0)),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0", "b running ready=true started=true restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "a container exited with a RestartAllContainers rule: AllContainersRestarting True",
			pod:    withContainerPolicy(testPod("p", "a", "b"), "a", v1.ContainerRestartPolicyNever, restartAllOn(7)),
			status: readyPodStatus(exited("a", 0, 7), running("b", 0)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False " + notReadyA, "ContainersReady=False " + notReadyA, scheduled,
					"AllContainersRestarting=True RestartAllContainersStarted container exited with restart policy rule"},
				Containers: []string{"a terminated(7 Error cri://a-0) ready=false started=false restarts=0 id=cri://a-0",
					"b running ready=true started=true restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "every container removed for the restart: waiting RestartingAllContainers, the condition turns False, Initialized stays",
			pod:    withContainerPolicy(withInit(testPod("p", "a", "b"), "i1"), "a", v1.ContainerRestartPolicyNever, restartAllOn(7)),
			status: readyPodStatus(),
			previous: &v1.PodStatus{Phase: v1.PodRunning,
				Conditions:            []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}, {Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}},
				InitContainerStatuses: []v1.ContainerStatus{apiTerminated("i1", "cri://i1-0", 0, 0)},
				ContainerStatuses:     []v1.ContainerStatus{apiTerminated("a", "cri://a-0", 0, 7), apiRunning("b", "cri://b-0", 0)}},
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a b]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a b]", scheduled, "AllContainersRestarting=False"},
				Init: []string{"i1 waiting(RestartingAllContainers: The container is removed because RestartAllContainers in place) ready=false started=false restarts=1 id=cri://i1-0 last=terminated(137 RestartingAllContainers )"},
				Containers: []string{"a waiting(RestartingAllContainers: The container is removed because RestartAllContainers in place) ready=false started=false restarts=1 id=cri://a-0 last=terminated(137 RestartingAllContainers )",
					"b waiting(RestartingAllContainers: The container is removed because RestartAllContainers in place) ready=false started=false restarts=1 id= last=terminated(137 RestartingAllContainers )"},
			},
		},
		{
			name:   "DisruptionTarget of the previous status is kept",
			pod:    testPod("p", "a"),
			status: readyPodStatus(running("a", 0)),
			previous: &v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
				{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet"}}},
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{"DisruptionTarget=True TerminationByKubelet", rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Generate(Input{Pod: tt.pod, Runtime: tt.status, RuntimeName: "cri", Previous: tt.previous})
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("Generate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObservedGeneration: the conditions the agent owns, and the status
// the Manager holds, carry the pod's generation (the kubelet's
// PodObservedGenerationTracking, GA since 1.35); AllContainersRestarting
// does not, as with the kubelet.
func TestObservedGeneration(t *testing.T) {
	pod := withContainerPolicy(testPod("p", "a"), "a", v1.ContainerRestartPolicyNever, restartAllOn(7))
	pod.Generation = 4
	pod.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue, ObservedGeneration: 1}}
	s := Generate(Input{Pod: pod, Runtime: readyPodStatus(running("a", 0))})
	for _, c := range s.Conditions {
		want := int64(4)
		switch c.Type {
		case "example.com/gate":
			want = 1
		case v1.AllContainersRestarting:
			want = 0
		}
		if c.ObservedGeneration != want {
			t.Errorf("condition %s: observedGeneration %d, want %d", c.Type, c.ObservedGeneration, want)
		}
	}
	m := NewManager(Options{})
	m.SetPodStatus(pod, s)
	if got, _ := m.GetPodStatus(pod.UID); got.ObservedGeneration != 4 {
		t.Errorf("status observedGeneration = %d, want 4", got.ObservedGeneration)
	}
}
