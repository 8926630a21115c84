package podruntime

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

func withEphemeral(pod *v1.Pod, target string, names ...string) *v1.Pod {
	for _, n := range names {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent},
			TargetContainerName:      target,
		})
	}
	return pod
}

// TestComputePodActionsEphemeral holds the kubelet v1.37 rules for
// ephemeral containers: started when they have no instance in any
// sandbox, never restarted, started before the pod is initialized, not
// started with a new sandbox.
func TestComputePodActionsEphemeral(t *testing.T) {
	ready := func() []*runtimeapi.PodSandboxStatus { return []*runtimeapi.PodSandboxStatus{readySandbox()} }
	tests := []struct {
		name   string
		pod    *v1.Pod
		status func(p *v1.Pod) *runtime.PodStatus
		want   podActions
	}{
		{
			name: "running pod, new ephemeral container: started",
			pod:  withEphemeral(testPod("p", "a"), "a", "debug"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", EphemeralContainersToStart: []int{0}},
		},
		{
			name: "ephemeral container running: nothing to do",
			pod:  withEphemeral(testPod("p", "a"), "", "debug"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "debug", runtime.ContainerStateRunning, 0), cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "ephemeral container failed under restartPolicy Always: never restarted",
			pod:  withEphemeral(testPod("p", "a"), "", "debug"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "debug", runtime.ContainerStateExited, 1), cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "ephemeral container created but not started, or unknown: not started again",
			pod:  withEphemeral(testPod("p", "a"), "", "d1", "d2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "d1", runtime.ContainerStateCreated, 0), cs(p, "d2", runtime.ContainerStateUnknown, 0), cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "instance left in an old sandbox counts: not started again",
			pod:  withEphemeral(testPod("p", "a"), "", "debug"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					inSandbox(cs(p, "debug", runtime.ContainerStateExited, 0), "sb0"), cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1"},
		},
		{
			name: "second of two ephemeral containers: only it starts",
			pod:  withEphemeral(testPod("p", "a"), "a", "d1", "d2"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "d1", runtime.ContainerStateExited, 0), cs(p, "a", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", EphemeralContainersToStart: []int{1}},
		},
		{
			name: "pod still initializing: the ephemeral container starts beside the init container",
			pod:  withEphemeral(withInit(testPod("p", "a"), "i1"), "", "debug"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{cs(p, "i1", runtime.ContainerStateRunning, 0)}}
			},
			want: podActions{SandboxID: "sb1", EphemeralContainersToStart: []int{0}},
		},
		{
			name: "new sandbox: the pod starts over, no ephemeral container yet",
			pod:  withEphemeral(testPod("p", "a"), "", "debug"),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{}
			},
			want: podActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0}},
		},
		{
			name: "ephemeral container running while the app container is gone for good: the pod is killed",
			pod:  withPolicy(withEphemeral(testPod("p", "a"), "", "debug"), v1.RestartPolicyNever),
			status: func(p *v1.Pod) *runtime.PodStatus {
				return &runtime.PodStatus{SandboxStatuses: ready(), ContainerStatuses: []*runtime.ContainerStatus{
					cs(p, "debug", runtime.ContainerStateRunning, 0), cs(p, "a", runtime.ContainerStateExited, 0)}}
			},
			want: podActions{SandboxID: "sb1", KillPod: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.status(tt.pod), SyncPodOptions{})
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []int) bool { return cmp.Equal(emptyNil(a), emptyNil(b)) }),
				cmp.Comparer(func(a, b []containerToKill) bool {
					return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b, cmp.AllowUnexported(v1.Container{}))
				})); diff != "" {
				t.Errorf("computePodActions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithTargetNamespace(t *testing.T) {
	for _, tt := range []struct {
		name       string
		mode       runtimeapi.NamespaceMode
		target     string
		wantMode   runtimeapi.NamespaceMode
		wantTarget string
	}{
		{"own PID namespace: the target's", runtimeapi.NamespaceMode_CONTAINER, "c1", runtimeapi.NamespaceMode_TARGET, "c1"},
		{"no target: unchanged", runtimeapi.NamespaceMode_CONTAINER, "", runtimeapi.NamespaceMode_CONTAINER, ""},
		{"shareProcessNamespace: the pod's already", runtimeapi.NamespaceMode_POD, "c1", runtimeapi.NamespaceMode_POD, ""},
		{"hostPID: the node's", runtimeapi.NamespaceMode_NODE, "c1", runtimeapi.NamespaceMode_NODE, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: tt.mode}}
			withTargetNamespace(sc, tt.target)
			if got := sc.NamespaceOptions; got.Pid != tt.wantMode || got.TargetId != tt.wantTarget {
				t.Errorf("pid %v target %q, want %v %q", got.Pid, got.TargetId, tt.wantMode, tt.wantTarget)
			}
		})
	}
}

func TestSyncPodEphemeralContainer(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("eph", "a")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	target := f.container(pod, "a").Id
	withEphemeral(pod, "a", "debug")
	f.calls()
	res := f.sync(t, pod)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"debug"}, startedNames(res)); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
	cfg := f.rec.lastContainerConfig("debug")
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != target {
		t.Errorf("debug's PID namespace %v target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), target)
	}
	if got := cfg.GetAnnotations()[runtime.AnnotationContainerType]; got != runtime.ContainerTypeEphemeral {
		t.Errorf("container type %q, want %q", got, runtime.ContainerTypeEphemeral)
	}
	if got := f.rec.lastContainerConfig("a").GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("a's PID namespace %v, want CONTAINER", got)
	}

	// It exits: never started again, whatever the restart policy.
	f.exit(pod, "debug", 1)
	for range 2 {
		if err := f.sync(t, pod).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.countContainers(pod, "debug"); n != 1 {
		t.Errorf("%d instances of the ephemeral container, want 1", n)
	}

	// KillPod stops it with the others.
	withEphemeral(pod, "", "debug2")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	d2 := f.container(pod, "debug2").Id
	f.rec.stopTimeouts()
	if err := f.m.KillPod(t.Context(), pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := f.rec.stopTimeouts()[d2]; !ok || got != 30 {
		t.Errorf("debug2 stopped %v with grace %d, want the pod's 30", ok, got)
	}
}

func TestSyncPodEphemeralTargetMissing(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("eph", "a")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	withEphemeral(pod, "nosuch", "debug")
	res := f.sync(t, pod)
	ar := startResult(res, "debug")
	if !errors.Is(ar.Err, ErrCreateContainerConfig) || !strings.Contains(ar.Message, "unable to find target container nosuch") {
		t.Errorf("start of debug: %v %q, want CreateContainerConfigError about the target", ar.Err, ar.Message)
	}
	if reason, msg, ok := f.m.WaitingReason(pod.UID, "debug"); !ok || reason != "CreateContainerConfigError" || msg == "" {
		t.Errorf("waiting reason %q %q %v", reason, msg, ok)
	}
}

func TestSyncPodEphemeralSharedPIDNamespace(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("eph", "a")
	pod.Spec.ShareProcessNamespace = ptr(true)
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	withEphemeral(pod, "a", "debug")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	ns := f.rec.lastContainerConfig("debug").GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_POD || ns.GetTargetId() != "" {
		t.Errorf("PID namespace %v target %q, want POD and no target", ns.GetPid(), ns.GetTargetId())
	}
}

// An orphan (killed without its pod, as after a restart of the agent) gets
// the preStop hook recorded on it, before it is stopped, as with the
// kubelet.
func TestKillOrphanRunsRecordedPreStop(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("orphan", "a", "b")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo bye"}}}}
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	running := runtime.RunningPod(f.status(t, pod))
	f.calls()
	a := f.container(pod, "a").Id
	hookRan := false
	f.rec.stopHook = func(id string) {
		if id == a {
			f.rs.Lock()
			hookRan = slices.Contains(f.rs.Called, "ExecSync")
			f.rs.Unlock()
		}
	}
	if err := f.m.KillPod(t.Context(), nil, running, nil); err != nil {
		t.Fatal(err)
	}
	if !hookRan {
		t.Error("a was stopped before its preStop hook ran")
	}
	if diff := cmp.Diff([]string{"ExecSync", "StopContainer", "StopContainer", "StopPodSandbox"}, sortedFirst(f.calls(), "ExecSync")); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	restoredPod, c := f.m.restoreOrphan(t.Context(), f.container(pod, "a").Id)
	if restoredPod == nil || restoredPod.UID != pod.UID || restoredPod.Name != pod.Name || restoredPod.Namespace != pod.Namespace ||
		*restoredPod.Spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("restored pod %+v", restoredPod)
	}
	if diff := cmp.Diff(pod.Spec.Containers[0].Lifecycle.PreStop, c.Lifecycle.PreStop); diff != "" {
		t.Errorf("restored preStop (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pod.Spec.Containers[0].Ports, c.Ports); diff != "" {
		t.Errorf("restored ports (-want +got):\n%s", diff)
	}
	if _, c := f.m.restoreOrphan(t.Context(), f.container(pod, "b").Id); c.Lifecycle != nil || c.Name != "b" {
		t.Errorf("b restored with %+v", c)
	}
}

// A malformed recorded hook is logged and the container stopped without
// it.
func TestKillOrphanBadPreStopAnnotation(t *testing.T) {
	f := newFakes(t, Options{})
	pod := testPod("orphan", "a")
	if err := f.sync(t, pod).Err(); err != nil {
		t.Fatal(err)
	}
	id := f.container(pod, "a").Id
	f.rs.Lock()
	f.rs.Containers[id].Annotations[annotationPreStopHandler] = "{not json"
	f.rs.Unlock()
	running := runtime.RunningPod(f.status(t, pod))
	f.calls()
	if err := f.m.KillPod(t.Context(), nil, running, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"StopContainer", "StopPodSandbox"}, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// sortedFirst moves the calls named first to the front (the containers
// stop in parallel).
func sortedFirst(calls []string, first string) []string {
	var a, b []string
	for _, c := range calls {
		if c == first {
			a = append(a, c)
		} else {
			b = append(b, c)
		}
	}
	return append(a, b...)
}
