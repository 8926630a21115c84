package status

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// The waiting reasons the kubelet gives containers that have no instance.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	// ReasonPodSandboxNotReady is the reason of PodReadyToStartContainers
	// False; its message is one of runtime's SandboxMessage constants.
	ReasonPodSandboxNotReady = "PodSandboxNotReady"
)

// ProbeResults set the Started and Ready flags of a pod's container
// statuses from its probes' results. probe.Manager implements it.
type ProbeResults interface {
	UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus)
}

// WaitingReasons tell why a container that is to be (re)started is not
// running: the reason and message of its last failed start (ErrImagePull,
// CrashLoopBackOff, CreateContainerConfigError, ...). runtime.Manager
// implements it.
type WaitingReasons interface {
	WaitingReason(uid types.UID, container string) (reason, message string, ok bool)
}

// Input is what a pod's API status is generated from.
type Input struct {
	// Pod is the pod as its source has it. Conditions that the agent does
	// not own are copied from its status.
	Pod *v1.Pod
	// Runtime is the pod's status in the runtime; nil when the runtime
	// has nothing of the pod.
	Runtime *runtime.PodStatus
	// RuntimeName prefixes the container IDs ("containerd://...").
	RuntimeName string
	// Probes, when set, decide the containers' Started and Ready flags.
	// Without them a running container is Ready when it has no readiness
	// and no startup probe, and Started when it has no startup probe.
	Probes ProbeResults
	// Waiting, when set, gives the waiting reasons of containers whose
	// last start failed.
	Waiting WaitingReasons
	// HostIPs are the node's addresses, reported as hostIP and hostIPs.
	HostIPs []string
	// Terminal marks a pod whose containers will not run again whatever
	// its restart policy (it was stopped for good): its phase is final,
	// Succeeded when every container exited 0 and Failed otherwise, also
	// when its containers never ran.
	Terminal bool
}

// Generate is the pod's API status, as the kubelet's generateAPIPodStatus
// builds it: phase (podmodel.Phase), the conditions the agent owns
// (PodReadyToStartContainers, Initialized, Ready, ContainersReady,
// PodScheduled) without transition times, init and app container statuses
// in spec order, pod and host IPs, and the QoS class. Merging with the
// status reported before (start time, transition times) is the Manager's
// (SetPodStatus).
//
// Generate is a pure function of its input but for in.Probes, which may
// trigger a readiness probe whose result is not known yet.
func Generate(in Input) v1.PodStatus {
	pod := in.Pod
	rs := in.Runtime
	if rs == nil {
		rs = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	var s v1.PodStatus
	for _, ip := range rs.IPs {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	for _, ip := range in.HostIPs {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
	s.QOSClass = podmodel.QOSClass(pod)
	hasInit := len(pod.Spec.InitContainers) > 0
	s.InitContainerStatuses = containerStatuses(&in, rs, pod.Spec.InitContainers, hasInit, true)
	s.ContainerStatuses = containerStatuses(&in, rs, pod.Spec.Containers, hasInit, false)
	if in.Probes != nil {
		in.Probes.UpdatePodStatus(pod, &s)
	}
	s.Phase = podmodel.Phase(pod, &s, in.Terminal)
	if in.Terminal && !podmodel.IsTerminal(s.Phase) {
		s.Phase = v1.PodFailed
	}

	for _, c := range pod.Status.Conditions {
		if !kubeletCondition(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	rtsc := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	if changed, msg := runtime.PodSandboxChanged(pod, rs); changed {
		rtsc = v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: ReasonPodSandboxNotReady, Message: msg}
	}
	s.Conditions = append(s.Conditions, rtsc)
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Conditions = append(s.Conditions, podmodel.InitializedCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, podmodel.ReadyCondition(pod, s.Conditions, all, s.Phase))
	s.Conditions = append(s.Conditions, podmodel.ContainersReadyCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
	return s
}

func kubeletCondition(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady, v1.PodReadyToStartContainers:
		return true
	}
	return false
}

func boolPtr(b bool) *bool { return &b }

// apiState converts one runtime instance to an API state.
func apiState(cs *runtime.ContainerStatus, cid string) v1.ContainerState {
	switch cs.State {
	case runtime.ContainerStateRunning:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}}
	case runtime.ContainerStateExited:
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: cid,
		}}
	}
	// Created (not started yet) and unknown are waiting to run.
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}
}

func containerStatuses(in *Input, status *runtime.PodStatus, containers []v1.Container, hasInit, isInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	pod := in.Pod
	defaultReason := ReasonContainerCreating
	if hasInit {
		defaultReason = ReasonPodInitializing
	}
	out := make([]v1.ContainerStatus, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		st := v1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			State:   v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultReason}},
			Started: boolPtr(false),
		}
		seen := 0
		var newest *runtime.ContainerStatus
		for _, cs := range status.ContainerStatuses { // newest first
			if cs.Name != c.Name {
				continue
			}
			cid := ""
			if cs.ID != "" {
				cid = in.RuntimeName + "://" + cs.ID
			}
			if seen == 0 {
				newest = cs
				st.State = apiState(cs, cid)
				st.RestartCount = int32(cs.RestartCount)
				st.Image = cs.Image
				st.ImageID = cs.ImageRef
				st.ContainerID = cid
			} else {
				st.LastTerminationState = apiState(cs, cid)
				break
			}
			seen++
		}
		running := newest != nil && newest.State == runtime.ContainerStateRunning
		switch {
		case isInit && !podmodel.IsRestartableInit(c):
			st.Ready = newest != nil && newest.State == runtime.ContainerStateExited && newest.ExitCode == 0
			st.Started = boolPtr(running)
		default:
			st.Ready = running && c.ReadinessProbe == nil && c.StartupProbe == nil
			st.Started = boolPtr(running && c.StartupProbe == nil)
		}

		// A container that SyncPod will (re)start shows why it has not yet.
		initDone := isInit && !podmodel.IsRestartableInit(c) && newest != nil && newest.State == runtime.ContainerStateExited && newest.ExitCode == 0
		restartPod := pod
		if isInit && podmodel.IsRestartableInit(c) && pod.Spec.RestartPolicy != v1.RestartPolicyAlways {
			restartPod = pod.DeepCopy()
			restartPod.Spec.RestartPolicy = v1.RestartPolicyAlways
		}
		if !initDone && in.Waiting != nil && runtime.ShouldContainerBeRestarted(c, restartPod, status) {
			if reason, message, ok := in.Waiting.WaitingReason(pod.UID, c.Name); ok {
				if st.State.Terminated != nil {
					st.LastTerminationState = st.State
				}
				st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: message}}
			}
		}
		out = append(out, st)
	}
	return out
}
