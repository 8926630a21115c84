package status

import (
	"net/netip"
	"slices"
	"strings"

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
	// ReasonContainerStatusUnknown is the terminated reason of a container
	// that was running and can no longer be found in the runtime.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// ReasonRestartAllContainersStarted is the reason of the
	// AllContainersRestarting condition while the pod's containers are
	// being removed to start over.
	ReasonRestartAllContainersStarted = "RestartAllContainersStarted"
)

// ProbeResults set the Started and Ready flags of a pod's container
// statuses from its probes' results. probe.Manager implements it.
type ProbeResults interface {
	UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus)
}

// WaitingReasons tell why a container that is to be (re)started is not
// running: the reason and message of its last failed start (ErrImagePull,
// CrashLoopBackOff, CreateContainerConfigError, ...). podruntime.Manager
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
	// Previous is the pod's API status as last generated (the status
	// Manager's, GetPodStatus). Defaults to nil: the status the pod
	// carries (Pod.Status, as its source last reported it). From it come
	// what the runtime has forgotten: restart counts never go down, a
	// terminated state stays once its container is gone, a container that
	// vanished while running shows as terminated with reason
	// ContainerStatusUnknown (exit code 137), a terminal phase is kept.
	Previous *v1.PodStatus
	// ResizePending is the pod's PodResizePending condition while a
	// resize it asked for is not allocated (reason Infeasible or
	// Deferred); nil when none is pending. The agent decides it
	// (podmodel.DecideResize). Pod then holds the allocated resources.
	ResizePending *v1.PodCondition
	// PodCgroup is the pod cgroup's cpu and memory as read (and, for a
	// pod with pod-level resources, as the allocated resources give
	// them), for a pod with pod-level resources or Running
	// (pod.Status.Phase); nil when unknown. From it come
	// PodResizeInProgress for a resize of the pod-level resources and a
	// Running pod's status.resources, with in.Previous where it was not
	// read.
	PodCgroup *PodCgroupState
}

// ResizeErrors tell the message of a pod's last failed resize in place.
// podruntime.Manager implements it; Generate finds it on Input.Waiting.
type ResizeErrors interface {
	ResizeError(uid types.UID) (string, bool)
}

// Generate is the pod's API status, as the kubelet's generateAPIPodStatus
// builds it: phase (podmodel.Phase), the conditions the agent owns
// (PodReadyToStartContainers, Initialized, Ready, ContainersReady,
// PodScheduled, and AllContainersRestarting for pods with a
// RestartAllContainers rule) without transition times, init container
// statuses in spec order and app container statuses by name, pod and host
// IPs, and the QoS class, all carried over from in.Previous where the
// runtime no longer knows. Merging with the status reported before (start
// time, transition times) is the Manager's (SetPodStatus).
//
// A hostNetwork pod, which the runtime gives no address of its own, has
// the node's: the first host IP, and the second when it is of the other
// family, as the kubelet's.
//
// Generate is a pure function of its input but for in.Probes, which may
// trigger a readiness probe whose result is not known yet.
func Generate(in Input) v1.PodStatus {
	pod := in.Pod
	rs := in.Runtime
	if rs == nil {
		rs = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	old := in.Previous
	if old == nil {
		old = &pod.Status
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
	if pod.Spec.HostNetwork {
		s.PodIP, s.PodIPs = hostNetworkPodIPs(s.PodIP, s.PodIPs, in.HostIPs)
	}
	// The class never changes (a resize keeps it): the one given before,
	// as the kubelet takes the pod's status's, else computed.
	s.QOSClass = old.QOSClass
	if s.QOSClass == "" {
		s.QOSClass = qosClass(pod)
	}
	s.AllocatedResources, s.Resources = podResources(pod, in.PodCgroup, old)
	restarting := ShouldAllContainersRestart(pod, rs, old)
	conv := converter{in: &in, rs: rs, hasInit: len(pod.Spec.InitContainers) > 0, restarting: restarting}
	s.InitContainerStatuses = conv.statuses(pod.Spec.InitContainers, old.InitContainerStatuses, true)
	s.ContainerStatuses = conv.statuses(pod.Spec.Containers, old.ContainerStatuses, false)
	s.EphemeralContainerStatuses = conv.ephemeralStatuses(old.EphemeralContainerStatuses)

	s.Phase = podmodel.Phase(pod, &s, in.Terminal, runtime.HasAnyActiveRegularContainerStarted(pod, rs))
	if !podmodel.IsTerminal(s.Phase) {
		// A terminal phase is final.
		switch {
		case podmodel.IsTerminal(old.Phase):
			s.Phase = old.Phase
		case podmodel.IsTerminal(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if podmodel.IsTerminal(pod.Status.Phase) {
		s.Phase = pod.Status.Phase
	}
	if in.Terminal && !podmodel.IsTerminal(s.Phase) {
		s.Phase = v1.PodFailed
	}
	if in.Probes != nil {
		in.Probes.UpdatePodStatus(pod, &s)
	}

	// The conditions kept from the pod's status, and the agent's own (at
	// most seven), in one allocation.
	s.Conditions = make([]v1.PodCondition, 0, len(pod.Status.Conditions)+8)
	for _, c := range pod.Status.Conditions {
		if !OwnedCondition(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	// DisruptionTarget as the agent set it last (eviction, shutdown).
	if c := findCondition(old.Conditions, v1.DisruptionTarget); c != nil {
		if i := slices.IndexFunc(s.Conditions, func(x v1.PodCondition) bool { return x.Type == v1.DisruptionTarget }); i >= 0 {
			s.Conditions[i] = *c
		} else {
			s.Conditions = append(s.Conditions, *c)
		}
	}
	rtsc := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	if changed, _, _, msg := runtime.PodSandboxChanged(pod, rs); changed {
		rtsc = v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: ReasonPodSandboxNotReady, Message: msg}
	}
	s.Conditions = append(s.Conditions, rtsc)
	all := s.ContainerStatuses // read only below
	if len(s.InitContainerStatuses) > 0 {
		all = append(slices.Clip(s.InitContainerStatuses), s.ContainerStatuses...)
	}
	wasInitialized := false
	if c := findCondition(old.Conditions, v1.PodInitialized); c != nil && c.Status == v1.ConditionTrue {
		wasInitialized = true
	}
	s.Conditions = append(s.Conditions, podmodel.InitializedCondition(pod, all, s.Phase, wasInitialized))
	s.Conditions = append(s.Conditions, podmodel.ReadyCondition(pod, s.Conditions, all, s.Phase))
	s.Conditions = append(s.Conditions, podmodel.ContainersReadyCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
	for i := range s.Conditions {
		if c := &s.Conditions[i]; OwnedCondition(c.Type) {
			c.ObservedGeneration = pod.Generation
		}
	}
	if podmodel.AllContainersCouldRestart(&pod.Spec) {
		s.Conditions = append(s.Conditions, allContainersRestartingCondition(pod, rs, old, s.Phase))
	}
	s.Conditions = append(s.Conditions, resizeConditions(in, rs, s.Phase)...)
	return s
}

// qosClass is podmodel.QOSClass, found at once for a pod that sets no
// requests or limits at all, pod-level or in any container: BestEffort.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass == "" && noRequestsOrLimits(pod) {
		return v1.PodQOSBestEffort
	}
	return podmodel.QOSClass(pod)
}

// noRequestsOrLimits reports whether the pod sets no requests or limits,
// pod-level or in any container (ephemeral containers have none).
func noRequestsOrLimits(pod *v1.Pod) bool {
	return pod.Spec.Resources == nil && noResources(pod.Spec.Containers) && noResources(pod.Spec.InitContainers)
}

func noResources(cs []v1.Container) bool {
	for i := range cs {
		if len(cs[i].Resources.Requests) > 0 || len(cs[i].Resources.Limits) > 0 {
			return false
		}
	}
	return true
}

// ShouldAllContainersRestart reports whether the pod's containers are to
// be restarted in place, as the kubelet decides it: the previous status
// has AllContainersRestarting True, or a container (init or app) exited,
// in the runtime or as the previous status shows it, with an exit code
// whose first matching rule is RestartAllContainers.
func ShouldAllContainersRestart(pod *v1.Pod, rs *runtime.PodStatus, old *v1.PodStatus) bool {
	if podmodel.RestartAllRequested(pod, old) {
		return true
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if cs := rs.FindContainerStatusByName(c.Name); cs != nil && cs.State == runtime.ContainerStateExited && podmodel.TriggersRestartAll(c, cs.ExitCode) {
				return true
			}
		}
	}
	return false
}

// allContainersRestartingCondition is the kubelet's AllContainersRestarting
// condition: True while a RestartAllContainers action has containers left
// to remove.
func allContainersRestartingCondition(pod *v1.Pod, rs *runtime.PodStatus, old *v1.PodStatus, phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}
	switch {
	case phase == v1.PodSucceeded:
		cond.Reason = podmodel.ReasonPodCompleted
		return cond
	case phase == v1.PodFailed:
		cond.Reason = podmodel.ReasonPodFailed
		return cond
	case !ShouldAllContainersRestart(pod, rs, old):
		return cond
	}
	cleaned := true
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if rs.FindContainerStatusByName(list[i].Name) != nil {
				cleaned = false
			}
		}
	}
	if cleaned {
		return cond
	}
	cond.Status = v1.ConditionTrue
	cond.Reason = ReasonRestartAllContainersStarted
	cond.Message = "container exited with restart policy rule"
	return cond
}

func boolPtr(b bool) *bool { return &b }

// converter turns runtime container instances into API container
// statuses, the kubelet's convertToAPIContainerStatuses.
type converter struct {
	in         *Input
	rs         *runtime.PodStatus
	hasInit    bool
	restarting bool // ShouldAllContainersRestart
}

// convert is the API status of one runtime instance, given the
// container's previous API status (nil when none).
func (cv *converter) convert(cs *runtime.ContainerStatus, old *v1.ContainerStatus) *v1.ContainerStatus {
	cid := ""
	if cs.ID != "" {
		cid = cv.in.RuntimeName + "://" + cs.ID
	}
	st := &v1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.RestartCount),
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  cid,
	}
	if old != nil {
		st.VolumeMounts = old.VolumeMounts
		// Restart counts never go down, and a removed instance's end is
		// remembered (the runtime forgets both across sandboxes and
		// RestartAllContainers).
		st.RestartCount = max(st.RestartCount, old.RestartCount)
		if old.ContainerID != st.ContainerID && old.State.Terminated != nil {
			st.LastTerminationState.Terminated = old.State.Terminated
		} else if old.LastTerminationState.Terminated != nil {
			st.LastTerminationState.Terminated = old.LastTerminationState.Terminated
		}
	}
	switch {
	case cs.State == runtime.ContainerStateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
		if old != nil && old.State.Terminated != nil && old.RestartCount >= int32(cs.RestartCount) {
			st.RestartCount = old.RestartCount + 1
		}
	case cs.State == runtime.ContainerStateCreated:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	case cs.State == runtime.ContainerStateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: cid,
		}
	case cs.State == runtime.ContainerStateUnknown && old != nil && old.State.Running != nil:
		// It ran and can no longer be found: it ended, how is unknown.
		reason := ReasonContainerStatusUnknown
		if cv.restarting {
			reason = podmodel.ReasonRestartingAllContainers
		}
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason:   reason,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: 137,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// statuses converts the containers of one list (init or app); previous
// are their statuses in the previous API status.
func (cv *converter) statuses(containers []v1.Container, previous []v1.ContainerStatus, isInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	pod := cv.in.Pod
	olds := make(map[string]v1.ContainerStatus, len(previous))
	for _, o := range previous {
		olds[o.Name] = o
	}
	defaultReason := ReasonContainerCreating
	if cv.hasInit {
		defaultReason = ReasonPodInitializing
	}
	statuses := make(map[string]*v1.ContainerStatus, len(containers))
	for i := range containers {
		c := &containers[i]
		st := &v1.ContainerStatus{Name: c.Name, Image: c.Image, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultReason}}}
		if o, ok := olds[c.Name]; ok {
			if o.State.Terminated != nil {
				st = o.DeepCopy()
			} else {
				st.RestartCount = o.RestartCount
				st.LastTerminationState = *o.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = st
	}

	// Containers the runtime no longer has.
	for i := range containers {
		c := &containers[i]
		if cv.rs.FindContainerStatusByName(c.Name) != nil {
			continue
		}
		o, ok := olds[c.Name]
		if !ok {
			continue
		}
		st := statuses[c.Name]
		if cv.restarting && o.State.Waiting == nil {
			// Removed to restart the pod in place.
			const msg = "The container is removed because RestartAllContainers in place"
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: podmodel.ReasonRestartingAllContainers, Message: msg}}
			st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{Reason: podmodel.ReasonRestartingAllContainers, Message: msg, ExitCode: 137}
			st.RestartCount = o.RestartCount + 1
			continue
		}
		if o.State.Terminated != nil || o.State.Running == nil {
			continue
		}
		if st.State.Waiting == nil || st.State.Waiting.Reason != defaultReason || st.LastTerminationState.Terminated != nil {
			continue
		}
		// It was running and vanished: it ended, how is unknown. Shown
		// as stopped, not waiting, so that the pod does not go back to
		// Pending.
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: 137,
		}
		if pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}

	// The newest instance is the state, the one before it the last state.
	seen := map[string]int{}
	for _, cs := range cv.rs.ContainerStatuses { // newest first
		if _, ok := statuses[cs.Name]; !ok || seen[cs.Name] >= 2 {
			continue
		}
		var oldp *v1.ContainerStatus
		if o, ok := olds[cs.Name]; ok {
			oldp = &o
		}
		st := cv.convert(cs, oldp)
		if st.State.Running != nil {
			st.Resources = containerStatusResources(podmodel.FindContainer(pod, cs.Name), cs, oldp, st.ContainerID)
		}
		if seen[cs.Name] == 0 {
			if st.State.Running != nil && oldp != nil && oldp.Started != nil && oldp.ContainerID == st.ContainerID {
				// The same instance keeps its Started until the probes
				// say otherwise (after a restart of the agent).
				st.Started = oldp.Started
			}
			statuses[cs.Name] = st
		} else {
			statuses[cs.Name].LastTerminationState = st.State
		}
		seen[cs.Name]++
	}

	for i := range containers {
		c := &containers[i]
		sidecar := isInit && podmodel.IsRestartableInit(c)
		if isInit && !sidecar {
			newest := cv.rs.FindContainerStatusByName(c.Name)
			if newest != nil && newest.State == runtime.ContainerStateExited && newest.ExitCode == 0 {
				continue
			}
			// Gone from the runtime after the pod was initialized: it
			// completed.
			if newest == nil && runtime.HasAnyRegularContainerCreated(pod, cv.rs) && statuses[c.Name].State.Waiting != nil {
				statuses[c.Name].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					Reason:   "Completed",
					Message:  "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
					ExitCode: 0,
				}}
				continue
			}
		}
		// A container that SyncPod will (re)start shows why it has not yet.
		if cv.in.Waiting == nil || !runtime.ShouldContainerBeRestarted(c, pod, cv.rs) {
			continue
		}
		if reason, message, ok := cv.in.Waiting.WaitingReason(pod.UID, c.Name); ok {
			st := statuses[c.Name]
			if st.State.Terminated != nil {
				st.LastTerminationState = st.State
			}
			st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: message}}
		}
	}

	out := make([]v1.ContainerStatus, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		st := statuses[c.Name]
		setFlags(st, c, isInit)
		if !isInit || podmodel.IsRestartableInit(c) {
			st.AllocatedResources = allocatedResources(c)
		}
		out = append(out, *st)
	}
	if !isInit {
		// The kubelet lists app container statuses by name.
		slices.SortStableFunc(out, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// setFlags sets Ready and Started as they are without probe results: a
// regular init container is ready once it exited 0 and started while it
// runs; any other container is started when it runs and has no startup
// probe, ready when also without readiness probe. A Started carried over
// from the previous status is kept (the probes decide it afterwards).
func setFlags(st *v1.ContainerStatus, c *v1.Container, isInit bool) {
	running := st.State.Running != nil
	if isInit && !podmodel.IsRestartableInit(c) {
		st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		if st.Started == nil || !running {
			st.Started = boolPtr(running)
		}
		return
	}
	st.Ready = running && c.ReadinessProbe == nil && c.StartupProbe == nil
	if st.Started == nil || !running {
		st.Started = boolPtr(running && c.StartupProbe == nil)
	}
}

// hostNetworkPodIPs returns the pod IPs of a hostNetwork pod as the
// kubelet gives them: the node's first IP when the runtime gave none, and
// its second when the node has one of the other family.
func hostNetworkPodIPs(podIP string, podIPs []v1.PodIP, hostIPs []string) (string, []v1.PodIP) {
	if len(hostIPs) == 0 {
		return podIP, podIPs
	}
	if podIP == "" {
		podIP = hostIPs[0]
		podIPs = []v1.PodIP{{IP: podIP}}
	}
	if len(hostIPs) > 1 && len(podIPs) == 1 && isIPv4(podIPs[0].IP) != isIPv4(hostIPs[1]) {
		podIPs = append(podIPs, v1.PodIP{IP: hostIPs[1]})
	}
	return podIP, podIPs
}

func isIPv4(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Unmap().Is4()
}
