package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
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

func running(name string, restarts int) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{ID: fmt.Sprintf("%s-%d", name, restarts), Name: name, State: runtime.ContainerStateRunning, RestartCount: restarts,
		StartedAt: time.Unix(100, 0), CreatedAt: time.Unix(int64(100+restarts), 0)}
}

func exited(name string, restarts int, code int32) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{ID: fmt.Sprintf("%s-%d", name, restarts), Name: name, State: runtime.ContainerStateExited, ExitCode: code, RestartCount: restarts,
		Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0], StartedAt: time.Unix(100, 0), FinishedAt: time.Unix(200, 0),
		CreatedAt: time.Unix(int64(100+restarts), 0)}
}

func readyPodStatus(cs ...*runtime.ContainerStatus) *runtime.PodStatus {
	return &runtime.PodStatus{IPs: []string{"10.0.0.1", "fd00::1"}, SandboxStatuses: []*runtimeapi.PodSandboxStatus{readySandbox()}, ContainerStatuses: cs}
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
		status  *runtime.PodStatus
		reasons map[string]reason
		want    statusSummary
	}{
		{
			name:   "nothing created yet",
			pod:    testPod("p", "a"),
			status: &runtime.PodStatus{},
			want: statusSummary{
				Phase: v1.PodPending,
				Conditions: []string{"PodReadyToStartContainers=False PodSandboxNotReady no pod sandbox exists", initTrue,
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
			reasons: map[string]reason{"i1": {"CrashLoopBackOff", "back-off 40s"}},
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
			reasons: map[string]reason{"a": {"CrashLoopBackOff", "back-off 5m0s restarting failed container=a pod=p_default(p-uid)"}},
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
			reasons: map[string]reason{"a": {"ErrImagePull", "Failed to pull image"}},
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
			status: readyPodStatus(&runtime.ContainerStatus{ID: "a-0", Name: "a", State: runtime.ContainerStateCreated}),
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
			got := Generate(Input{Pod: tt.pod, Runtime: tt.status, RuntimeName: "cri", Waiting: reasons{tt.pod.UID: tt.reasons}})
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("Generate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateIPsAndQOS(t *testing.T) {
	pod := testPod("p", "a")
	got := Generate(Input{Pod: pod, Runtime: readyPodStatus(running("a", 0)), HostIPs: []string{"192.168.1.2", "fd01::2"}})
	if got.HostIP != "192.168.1.2" || len(got.HostIPs) != 2 || got.HostIPs[1].IP != "fd01::2" {
		t.Errorf("host IPs = %q %v", got.HostIP, got.HostIPs)
	}
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

// TestGenerateHostNetworkPodIPs: a hostNetwork pod, which the runtime
// gives no IP, has the node's, one per family, as the kubelet's.
func TestGenerateHostNetworkPodIPs(t *testing.T) {
	pod := testPod("p", "a")
	pod.Spec.HostNetwork = true
	rs := readyPodStatus(running("a", 0))
	rs.IPs = nil
	for _, tc := range []struct {
		hostIPs []string
		want    []string
	}{
		{nil, nil},
		{[]string{"192.168.1.2"}, []string{"192.168.1.2"}},
		{[]string{"192.168.1.2", "fd01::2"}, []string{"192.168.1.2", "fd01::2"}},
		{[]string{"fd01::2", "192.168.1.2"}, []string{"fd01::2", "192.168.1.2"}},
		{[]string{"192.168.1.2", "192.168.1.3"}, []string{"192.168.1.2"}},
	} {
		got := Generate(Input{Pod: pod, Runtime: rs, HostIPs: tc.hostIPs})
		var ips []string
		for _, ip := range got.PodIPs {
			ips = append(ips, ip.IP)
		}
		wantIP := ""
		if len(tc.want) > 0 {
			wantIP = tc.want[0]
		}
		if got.PodIP != wantIP || !slices.Equal(ips, tc.want) {
			t.Errorf("host IPs %v: podIP %q, podIPs %v, want %q, %v", tc.hostIPs, got.PodIP, ips, wantIP, tc.want)
		}
	}
	// A pod on its own network keeps the runtime's IPs.
	pod.Spec.HostNetwork = false
	if got := Generate(Input{Pod: pod, Runtime: rs, HostIPs: []string{"192.168.1.2"}}); got.PodIP != "" || len(got.PodIPs) != 0 {
		t.Errorf("a pod on its own network without IPs: podIP %q, podIPs %v", got.PodIP, got.PodIPs)
	}
}

// TestGenerateProbes: the probe results' edits of the container flags
// decide the conditions.
func TestGenerateProbes(t *testing.T) {
	for _, ready := range []bool{false, true} {
		probes := probeResults(func(_ *v1.Pod, s *v1.PodStatus) {
			for i := range s.ContainerStatuses {
				s.ContainerStatuses[i].Ready = ready
			}
		})
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		status := &runtime.PodStatus{ID: "u", Name: "p", Namespace: "ns", ContainerStatuses: []*runtime.ContainerStatus{{
			ID: "c1", Name: "c", State: runtime.ContainerStateRunning, StartedAt: time.Unix(100, 0),
		}}}
		s := Generate(Input{Pod: pod, Runtime: status, Probes: probes})
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

// reason is a container's waiting reason and message.
type reason struct{ reason, message string }

// reasons implements WaitingReasons from a map.
type reasons map[types.UID]map[string]reason

func (r reasons) WaitingReason(uid types.UID, container string) (string, string, bool) {
	x, ok := r[uid][container]
	return x.reason, x.message, ok
}

// probeResults adapts a function to ProbeResults.
type probeResults func(*v1.Pod, *v1.PodStatus)

func (f probeResults) UpdatePodStatus(pod *v1.Pod, s *v1.PodStatus) { f(pod, s) }

func testPod(name string, containers ...string) *v1.Pod {
	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, NodeName: "node1"},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent})
	}
	return pod
}

func readySandbox() *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id:       "sb1",
		State:    runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{},
		Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.1"},
		Linux:    &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD}}},
	}
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
