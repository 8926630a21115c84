package runtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusSummary is a readable projection of a v1.PodStatus.
type statusSummary struct {
	Phase      v1.PodPhase
	Conditions []string
	Init       []string
	Containers []string
}

func summarizeState(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d %s %s)", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.ContainerID)
	case s.Waiting != nil:
		if s.Waiting.Message != "" {
			return fmt.Sprintf("waiting(%s: %s)", s.Waiting.Reason, s.Waiting.Message)
		}
		return fmt.Sprintf("waiting(%s)", s.Waiting.Reason)
	}
	return "none"
}

func summarizeContainers(list []v1.ContainerStatus) []string {
	var out []string
	for _, c := range list {
		s := fmt.Sprintf("%s %s ready=%v started=%v restarts=%d id=%s", c.Name, summarizeState(c.State), c.Ready, c.Started != nil && *c.Started, c.RestartCount, c.ContainerID)
		if last := summarizeState(c.LastTerminationState); last != "none" {
			s += " last=" + last
		}
		out = append(out, s)
	}
	return out
}

func summarize(s v1.PodStatus) statusSummary {
	sum := statusSummary{Phase: s.Phase, Init: summarizeContainers(s.InitContainerStatuses), Containers: summarizeContainers(s.ContainerStatuses)}
	for _, c := range s.Conditions {
		line := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" || c.Message != "" {
			line += strings.TrimRight(fmt.Sprintf(" %s %s", c.Reason, c.Message), " ")
		}
		sum.Conditions = append(sum.Conditions, line)
	}
	return sum
}

func running(name string, restarts int) *ContainerStatus {
	return &ContainerStatus{ID: fmt.Sprintf("%s-%d", name, restarts), Name: name, State: ContainerStateRunning, RestartCount: restarts,
		StartedAt: time.Unix(100, 0), CreatedAt: time.Unix(int64(100+restarts), 0)}
}

func exited(name string, restarts int, code int32) *ContainerStatus {
	return &ContainerStatus{ID: fmt.Sprintf("%s-%d", name, restarts), Name: name, State: ContainerStateExited, ExitCode: code, RestartCount: restarts,
		Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0], StartedAt: time.Unix(100, 0), FinishedAt: time.Unix(200, 0),
		CreatedAt: time.Unix(int64(100+restarts), 0)}
}

func readyPodStatus(cs ...*ContainerStatus) *PodStatus {
	return &PodStatus{IPs: []string{"10.0.0.1", "fd00::1"}, SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()}, ContainerStatuses: cs}
}

func TestAPIPodStatus(t *testing.T) {
	const (
		scheduled = "PodScheduled=True"
		rtscTrue  = "PodReadyToStartContainers=True"
		initTrue  = "Initialized=True"
	)
	tests := []struct {
		name    string
		pod     *v1.Pod
		status  *PodStatus
		reasons map[string]waitingReason
		want    statusSummary
	}{
		{
			name:   "nothing created yet",
			pod:    testPod("p", "a"),
			status: &PodStatus{},
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{"PodReadyToStartContainers=False", initTrue,
					"Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a waiting(ContainerCreating) ready=false started=false restarts=0 id="},
			},
		},
		{
			name:   "all running",
			pod:    testPod("p", "a", "b"),
			status: readyPodStatus(running("a", 0), running("b", 0)),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0", "b running ready=true started=true restarts=0 id=cri://b-0"},
			},
		},
		{
			name: "readiness probe: running but not ready until probed",
			pod: func() *v1.Pod {
				p := testPod("p", "a")
				p.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
				return p
			}(),
			status: readyPodStatus(running("a", 0)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a running ready=false started=true restarts=0 id=cri://a-0"},
			},
		},
		{
			name: "startup probe: neither started nor ready",
			pod: func() *v1.Pod {
				p := testPod("p", "a")
				p.Spec.Containers[0].StartupProbe = &v1.Probe{}
				return p
			}(),
			status: readyPodStatus(running("a", 0)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, "Initialized=True", "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a running ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "Never, all succeeded",
			pod:    withPolicy(testPod("p", "a", "b"), v1.RestartPolicyNever),
			status: readyPodStatus(exited("a", 0, 0), exited("b", 0, 0)),
			want: statusSummary{
				Phase:      v1.PodSucceeded,
				Conditions: []string{rtscTrue, "Initialized=True PodCompleted", "Ready=False PodCompleted", "ContainersReady=False PodCompleted", scheduled},
				Containers: []string{"a terminated(0 Completed cri://a-0) ready=false started=false restarts=0 id=cri://a-0",
					"b terminated(0 Completed cri://b-0) ready=false started=false restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "Never, one failed",
			pod:    withPolicy(testPod("p", "a", "b"), v1.RestartPolicyNever),
			status: readyPodStatus(exited("a", 0, 0), exited("b", 0, 2)),
			want: statusSummary{
				Phase:      v1.PodFailed,
				Conditions: []string{rtscTrue, initTrue, "Ready=False PodFailed", "ContainersReady=False PodFailed", scheduled},
				Containers: []string{"a terminated(0 Completed cri://a-0) ready=false started=false restarts=0 id=cri://a-0",
					"b terminated(2 Error cri://b-0) ready=false started=false restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "Never, one still running",
			pod:    withPolicy(testPod("p", "a", "b"), v1.RestartPolicyNever),
			status: readyPodStatus(exited("a", 0, 1), running("b", 0)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a terminated(1 Error cri://a-0) ready=false started=false restarts=0 id=cri://a-0",
					"b running ready=true started=true restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "Always, all exited: Running (restarting)",
			pod:    testPod("p", "a"),
			status: readyPodStatus(exited("a", 0, 0)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a terminated(0 Completed cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "OnFailure, a failure: Running (restarting)",
			pod:    withPolicy(testPod("p", "a"), v1.RestartPolicyOnFailure),
			status: readyPodStatus(exited("a", 0, 1)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a terminated(1 Error cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "OnFailure, all succeeded",
			pod:    withPolicy(testPod("p", "a"), v1.RestartPolicyOnFailure),
			status: readyPodStatus(exited("a", 0, 0)),
			want: statusSummary{
				Phase:      v1.PodSucceeded,
				Conditions: []string{rtscTrue, "Initialized=True PodCompleted", "Ready=False PodCompleted", "ContainersReady=False PodCompleted", scheduled},
				Containers: []string{"a terminated(0 Completed cri://a-0) ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "init container running: Pending, app containers PodInitializing",
			pod:    withInit(testPod("p", "a"), "i1", "i2"),
			status: readyPodStatus(running("i1", 0)),
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{rtscTrue, "Initialized=False ContainersNotInitialized containers with incomplete status: [i1 i2]",
					"Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Init: []string{"i1 running ready=false started=true restarts=0 id=cri://i1-0",
					"i2 waiting(PodInitializing) ready=false started=false restarts=0 id="},
				Containers: []string{"a waiting(PodInitializing) ready=false started=false restarts=0 id="},
			},
		},
		{
			name:   "init containers done, app running",
			pod:    withInit(testPod("p", "a"), "i1"),
			status: readyPodStatus(running("a", 0), exited("i1", 0, 0)),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Init:       []string{"i1 terminated(0 Completed cri://i1-0) ready=true started=false restarts=0 id=cri://i1-0"},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
		{
			name:   "init container failed under Never: Failed",
			pod:    withPolicy(withInit(testPod("p", "a"), "i1"), v1.RestartPolicyNever),
			status: readyPodStatus(exited("i1", 0, 1)),
			want: statusSummary{
				Phase: v1.PodFailed,
				Conditions: []string{rtscTrue, "Initialized=False ContainersNotInitialized containers with incomplete status: [i1]",
					"Ready=False PodFailed", "ContainersReady=False PodFailed", scheduled},
				Init:       []string{"i1 terminated(1 Error cri://i1-0) ready=false started=false restarts=0 id=cri://i1-0"},
				Containers: []string{"a waiting(PodInitializing) ready=false started=false restarts=0 id="},
			},
		},
		{
			name:    "init container in back-off: Pending with the reason",
			pod:     withInit(testPod("p", "a"), "i1"),
			status:  readyPodStatus(exited("i1", 3, 1), exited("i1", 2, 1)),
			reasons: map[string]waitingReason{"i1": {reason: "CrashLoopBackOff", message: "back-off 40s"}},
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{rtscTrue, "Initialized=False ContainersNotInitialized containers with incomplete status: [i1]",
					"Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Init:       []string{"i1 waiting(CrashLoopBackOff: back-off 40s) ready=false started=false restarts=3 id=cri://i1-3 last=terminated(1 Error cri://i1-3)"},
				Containers: []string{"a waiting(PodInitializing) ready=false started=false restarts=0 id="},
			},
		},
		{
			name:    "restart count and last state; CrashLoopBackOff from the reason cache",
			pod:     testPod("p", "a", "b"),
			status:  readyPodStatus(running("b", 0), exited("a", 5, 137), exited("a", 4, 1), exited("a", 3, 1)),
			reasons: map[string]waitingReason{"a": {reason: "CrashLoopBackOff", message: "back-off 5m0s restarting failed container=a pod=p_default(p-uid)"}},
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a waiting(CrashLoopBackOff: back-off 5m0s restarting failed container=a pod=p_default(p-uid)) ready=false started=false restarts=5 id=cri://a-5 last=terminated(137 Error cri://a-5)",
					"b running ready=true started=true restarts=0 id=cri://b-0"},
			},
		},
		{
			name:   "running with a previous instance: last state is the previous one",
			pod:    testPod("p", "a"),
			status: readyPodStatus(running("a", 2), exited("a", 1, 1)),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=2 id=cri://a-2 last=terminated(1 Error cri://a-1)"},
			},
		},
		{
			name:    "image pull error shows as waiting",
			pod:     testPod("p", "a"),
			status:  readyPodStatus(),
			reasons: map[string]waitingReason{"a": {reason: "ErrImagePull", message: "Failed to pull image"}},
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a waiting(ErrImagePull: Failed to pull image) ready=false started=false restarts=0 id="},
			},
		},
		{
			name:   "created but not started",
			pod:    testPod("p", "a"),
			status: readyPodStatus(&ContainerStatus{ID: "a-0", Name: "a", State: ContainerStateCreated}),
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{rtscTrue, initTrue, "Ready=False ContainersNotReady containers with unready status: [a]",
					"ContainersReady=False ContainersNotReady containers with unready status: [a]", scheduled},
				Containers: []string{"a waiting() ready=false started=false restarts=0 id=cri://a-0"},
			},
		},
		{
			name: "readiness gate not satisfied",
			pod: func() *v1.Pod {
				p := testPod("p", "a")
				p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
				return p
			}(),
			status: readyPodStatus(running("a", 0)),
			want: statusSummary{
				Phase: v1.PodRunning,
				Conditions: []string{rtscTrue, initTrue, `Ready=False ReadinessGatesNotReady corresponding condition of pod readiness gate "example.com/lb" does not exist.`,
					"ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
		{
			name: "readiness gate satisfied; foreign condition kept",
			pod: func() *v1.Pod {
				p := testPod("p", "a")
				p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
				p.Status.Conditions = []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionFalse}}
				return p
			}(),
			status: readyPodStatus(running("a", 0)),
			want: statusSummary{
				Phase:      v1.PodRunning,
				Conditions: []string{"example.com/lb=True", rtscTrue, initTrue, "Ready=True", "ContainersReady=True", scheduled},
				Containers: []string{"a running ready=true started=true restarts=0 id=cri://a-0"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakes(t, ManagerOptions{})
			for name, r := range tt.reasons {
				f.m.reasons[tt.pod.UID] = map[string]waitingReason{name: r}
			}
			got := f.m.APIPodStatus(tt.pod, tt.status)
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("APIPodStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIPodStatusIPsAndQOS(t *testing.T) {
	f := newFakes(t, ManagerOptions{})
	pod := testPod("p", "a")
	got := f.m.APIPodStatus(pod, readyPodStatus(running("a", 0)))
	if got.PodIP != "10.0.0.1" || len(got.PodIPs) != 2 || got.PodIPs[1].IP != "fd00::1" {
		t.Errorf("IPs = %q %v", got.PodIP, got.PodIPs)
	}
	if got.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("QOS = %s", got.QOSClass)
	}
	if got.ContainerStatuses[0].State.Running.StartedAt.Unix() != 100 {
		t.Errorf("startedAt = %v", got.ContainerStatuses[0].State.Running.StartedAt)
	}
}

func TestAPIPodStatusUsesRuntimeName(t *testing.T) {
	f := newFakes(t, ManagerOptions{})
	pod := testPod("p", "a")
	f.sync(t, pod)
	st := f.m.APIPodStatus(pod, f.status(t, pod))
	if id := st.ContainerStatuses[0].ContainerID; !strings.HasPrefix(id, "fakeRuntime://") {
		t.Errorf("container ID = %q, want the runtime's name as prefix", id)
	}
	if st.ContainerStatuses[0].ImageID == "" || st.ContainerStatuses[0].Image != "busybox:1.36" {
		t.Errorf("image = %q id %q", st.ContainerStatuses[0].Image, st.ContainerStatuses[0].ImageID)
	}
}

func resources(req, lim string) v1.ResourceRequirements {
	parse := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		l := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[v1.ResourceName(k)] = mustQuantity(v)
		}
		return l
	}
	return v1.ResourceRequirements{Requests: parse(req), Limits: parse(lim)}
}

func TestQOSClass(t *testing.T) {
	tests := []struct {
		name string
		res  []v1.ResourceRequirements
		init []v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{"nothing", []v1.ResourceRequirements{{}}, nil, v1.PodQOSBestEffort},
		{"only extended resources", []v1.ResourceRequirements{resources("example.com/gpu=1", "example.com/gpu=1")}, nil, v1.PodQOSBestEffort},
		{"requests equal limits", []v1.ResourceRequirements{resources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")}, nil, v1.PodQOSGuaranteed},
		{"zero requests ignored", []v1.ResourceRequirements{resources("cpu=0", "")}, nil, v1.PodQOSBestEffort},
		{"limits only (not defaulted)", []v1.ResourceRequirements{resources("", "cpu=1,memory=1Gi")}, nil, v1.PodQOSBurstable},
		{"requests below limits", []v1.ResourceRequirements{resources("cpu=500m,memory=1Gi", "cpu=1,memory=1Gi")}, nil, v1.PodQOSBurstable},
		{"a container without limits", []v1.ResourceRequirements{resources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi"), {}}, nil, v1.PodQOSBurstable},
		{"memory limit only", []v1.ResourceRequirements{resources("memory=1Gi", "memory=1Gi")}, nil, v1.PodQOSBurstable},
		{"init container breaks guarantee", []v1.ResourceRequirements{resources("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")},
			[]v1.ResourceRequirements{resources("cpu=1", "")}, v1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod("q")
			for i, r := range tt.res {
				pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Resources: r})
			}
			for i, r := range tt.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: fmt.Sprint("i", i), Resources: r})
			}
			if got := QOSClass(pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPodPhaseTerminal(t *testing.T) {
	pod := testPod("p", "a", "b")
	s := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "b", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}},
	}}
	if got := PodPhase(pod, s, false); got != v1.PodRunning {
		t.Errorf("not terminal, Always: %s, want Running", got)
	}
	if got := PodPhase(pod, s, true); got != v1.PodFailed {
		t.Errorf("terminal with a failure: %s, want Failed", got)
	}
	s.ContainerStatuses[1].State.Terminated.ExitCode = 0
	if got := PodPhase(pod, s, true); got != v1.PodSucceeded {
		t.Errorf("terminal, all succeeded: %s, want Succeeded", got)
	}
}

// TestAPIPodStatusHook: the hook's edits of the container flags decide the
// conditions.
func TestAPIPodStatusHook(t *testing.T) {
	for _, ready := range []bool{false, true} {
		m := newFakes(t, ManagerOptions{PodStatusHook: func(_ *v1.Pod, s *v1.PodStatus) {
			for i := range s.ContainerStatuses {
				s.ContainerStatuses[i].Ready = ready
			}
		}}).m
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		status := &PodStatus{ID: "u", Name: "p", Namespace: "ns", ContainerStatuses: []*ContainerStatus{{
			ID: "c1", Name: "c", State: ContainerStateRunning, StartedAt: time.Unix(100, 0),
		}}}
		s := m.APIPodStatus(pod, status)
		want := v1.ConditionFalse
		if ready {
			want = v1.ConditionTrue
		}
		for _, c := range s.Conditions {
			if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) && c.Status != want {
				t.Errorf("hook sets ready=%v: condition %s = %s, want %s", ready, c.Type, c.Status, want)
			}
		}
	}
}
