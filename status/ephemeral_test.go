package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

func withEphemeral(p *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox"}, TargetContainerName: "a"})
	}
	return p
}

// TestEphemeralContainerStatuses holds the kubelet v1.37 rules for
// ephemeralContainerStatuses: converted as app containers are, listed by
// name, never ready nor started, and left out of the phase and conditions.
func TestEphemeralContainerStatuses(t *testing.T) {
	allGood := []string{"PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True"}
	tests := []struct {
		name      string
		pod       *v1.Pod
		status    *runtime.PodStatus
		reasons   map[string]reason
		previous  *v1.PodStatus
		want      []string
		wantPhase v1.PodPhase
		wantConds []string
	}{
		{
			name:      "not created yet: waiting",
			pod:       withEphemeral(testPod("p", "a"), "debug"),
			status:    readyPodStatus(running("a", 0)),
			want:      []string{"debug waiting(ContainerCreating) ready=false started=false restarts=0 id="},
			wantPhase: v1.PodRunning, wantConds: allGood,
		},
		{
			name:      "pod with init containers: waiting with PodInitializing",
			pod:       withEphemeral(withInit(testPod("p", "a"), "i1"), "debug"),
			status:    readyPodStatus(exited("i1", 0, 0), running("a", 0)),
			want:      []string{"debug waiting(PodInitializing) ready=false started=false restarts=0 id="},
			wantPhase: v1.PodRunning, wantConds: allGood,
		},
		{
			name:      "running, listed by name: never ready, never started",
			pod:       withEphemeral(testPod("p", "a"), "zz", "debug"),
			status:    readyPodStatus(running("zz", 0), running("debug", 0), running("a", 0)),
			want:      []string{"debug running ready=false started=false restarts=0 id=cri://debug-0", "zz running ready=false started=false restarts=0 id=cri://zz-0"},
			wantPhase: v1.PodRunning, wantConds: allGood,
		},
		{
			name:      "failed: terminated, the pod stays Running and Ready",
			pod:       withEphemeral(testPod("p", "a"), "debug"),
			status:    readyPodStatus(exited("debug", 0, 2), running("a", 0)),
			want:      []string{"debug terminated(2 Error cri://debug-0) ready=false started=false restarts=0 id=cri://debug-0"},
			wantPhase: v1.PodRunning, wantConds: allGood,
		},
		{
			name:      "failed start: its waiting reason",
			pod:       withEphemeral(testPod("p", "a"), "debug"),
			status:    readyPodStatus(running("a", 0)),
			reasons:   map[string]reason{"debug": {"CreateContainerConfigError", "unable to find target container a"}},
			want:      []string{"debug waiting(CreateContainerConfigError: unable to find target container a) ready=false started=false restarts=0 id="},
			wantPhase: v1.PodRunning, wantConds: allGood,
		},
		{
			name: "an ephemeral container alone does not keep a Never pod running",
			pod: func() *v1.Pod {
				p := withEphemeral(testPod("p", "a"), "debug")
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				return p
			}(),
			status:    readyPodStatus(running("debug", 0), exited("a", 0, 0)),
			want:      []string{"debug running ready=false started=false restarts=0 id=cri://debug-0"},
			wantPhase: v1.PodSucceeded,
			wantConds: []string{"PodReadyToStartContainers=True", "Initialized=True PodCompleted", "Ready=False PodCompleted",
				"ContainersReady=False PodCompleted", "PodScheduled=True"},
		},
		{
			name:   "gone from the runtime after it ended: terminated stays",
			pod:    withEphemeral(testPod("p", "a"), "debug"),
			status: readyPodStatus(running("a", 0)),
			previous: &v1.PodStatus{EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "debug", ContainerID: "cri://debug-0",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", ContainerID: "cri://debug-0"}}}}},
			want:      []string{"debug terminated(0 Completed cri://debug-0) ready=false started=false restarts=0 id=cri://debug-0"},
			wantPhase: v1.PodRunning, wantConds: allGood,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Generate(Input{Pod: tt.pod, Runtime: tt.status, RuntimeName: "cri", Waiting: reasons{tt.pod.UID: tt.reasons}, Previous: tt.previous})
			if diff := cmp.Diff(tt.want, summarizeContainers(got.EphemeralContainerStatuses)); diff != "" {
				t.Errorf("ephemeral statuses (-want +got):\n%s", diff)
			}
			for _, s := range got.EphemeralContainerStatuses {
				if s.Started != nil {
					t.Errorf("%s: Started set", s.Name)
				}
			}
			sum := summarize(got)
			if sum.Phase != tt.wantPhase {
				t.Errorf("phase %s, want %s", sum.Phase, tt.wantPhase)
			}
			if diff := cmp.Diff(tt.wantConds, sum.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if len(got.ContainerStatuses) != 1 {
				t.Errorf("container statuses %v: the ephemeral containers must not be among them", summarizeContainers(got.ContainerStatuses))
			}
		})
	}
	if got := Generate(Input{Pod: testPod("p", "a"), Runtime: readyPodStatus(running("a", 0))}); got.EphemeralContainerStatuses != nil {
		t.Errorf("a pod without ephemeral containers has ephemeral statuses %v", got.EphemeralContainerStatuses)
	}
}
