package runtime

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The waiting reasons the kubelet gives containers that have no instance.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
)

// The condition reasons of the kubelet's status generator.
const (
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// APIPodStatus generates the pod's API status from its runtime status, as
// the kubelet's generateAPIPodStatus does: phase, the kubelet-owned
// conditions (without transition times, which belong to the status
// manager), init and app container statuses in spec order (waiting reasons
// from the manager's last failed start of each container), pod IPs and QoS
// class. Conditions owned by others are copied from pod.Status. StartTime,
// HostIP and a terminal phase set by a kill are the caller's.
//
// By default a running container is Ready when it has no readiness probe
// and no startup probe, and Started when it has no startup probe;
// ManagerOptions.PodStatusHook (the probe manager) overrides both.
func (m *Manager) APIPodStatus(pod *v1.Pod, status *PodStatus) v1.PodStatus {
	if status == nil {
		status = &PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	runtimeName := m.RuntimeName()
	var s v1.PodStatus
	for _, ip := range status.IPs {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	s.QOSClass = QOSClass(pod)
	hasInit := len(pod.Spec.InitContainers) > 0
	s.InitContainerStatuses = m.containerStatuses(pod, status, runtimeName, pod.Spec.InitContainers, hasInit, true)
	s.ContainerStatuses = m.containerStatuses(pod, status, runtimeName, pod.Spec.Containers, hasInit, false)
	if m.opts.PodStatusHook != nil {
		m.opts.PodStatusHook(pod, &s)
	}
	s.Phase = PodPhase(pod, &s, false)

	for _, c := range pod.Status.Conditions {
		if !kubeletCondition(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	ready, _, _ := sandboxChanged(pod, status)
	rtsc := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	if ready {
		rtsc.Status = v1.ConditionFalse
	}
	s.Conditions = append(s.Conditions, rtsc)
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Conditions = append(s.Conditions, initializedCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, podReadyCondition(pod, s.Conditions, all, s.Phase))
	s.Conditions = append(s.Conditions, containersReadyCondition(pod, all, s.Phase))
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

func isRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

func boolPtr(b bool) *bool { return &b }

// apiState converts one runtime instance to an API state.
func apiState(cs *ContainerStatus, cid string) v1.ContainerState {
	switch cs.State {
	case ContainerStateRunning:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}}
	case ContainerStateExited:
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

func (m *Manager) containerStatuses(pod *v1.Pod, status *PodStatus, runtimeName string, containers []v1.Container, hasInit, isInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
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
		var newest *ContainerStatus
		for _, cs := range status.ContainerStatuses { // newest first
			if cs.Name != c.Name {
				continue
			}
			cid := ""
			if cs.ID != "" {
				cid = runtimeName + "://" + cs.ID
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
		running := newest != nil && newest.State == ContainerStateRunning
		switch {
		case isInit && !isRestartableInit(c):
			st.Ready = newest != nil && newest.State == ContainerStateExited && newest.ExitCode == 0
			st.Started = boolPtr(running)
		default:
			st.Ready = running && c.ReadinessProbe == nil && c.StartupProbe == nil
			st.Started = boolPtr(running && c.StartupProbe == nil)
		}

		// A container that SyncPod will (re)start shows why it has not yet.
		initDone := isInit && !isRestartableInit(c) && newest != nil && newest.State == ContainerStateExited && newest.ExitCode == 0
		restartPod := pod
		if isInit && isRestartableInit(c) && pod.Spec.RestartPolicy != v1.RestartPolicyAlways {
			restartPod = pod.DeepCopy()
			restartPod.Spec.RestartPolicy = v1.RestartPolicyAlways
		}
		if !initDone && shouldContainerBeRestarted(c, restartPod, status) {
			if r, ok := m.waitingReason(pod.UID, c.Name); ok {
				if st.State.Terminated != nil {
					st.LastTerminationState = st.State
				}
				st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: r.reason, Message: r.message}}
			}
		}
		out = append(out, st)
	}
	return out
}

// PodPhase computes the pod's phase from the container statuses of s, as
// the kubelet's getPhase: init containers not yet succeeded keep the pod
// Pending (a failed one fails it under restartPolicy Never); then Running
// while any container runs, Succeeded or Failed once all stopped per the
// restart policy. podIsTerminal marks a pod whose containers will not run
// again whatever its restart policy (it was killed for good).
func PodPhase(pod *v1.Pod, s *v1.PodStatus, podIsTerminal bool) v1.PodPhase {
	spec := &pod.Spec
	pendingInit, failedInit := 0, 0
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		cs, ok := findStatus(s.InitContainerStatuses, c.Name)
		if isRestartableInit(c) {
			switch {
			case !ok:
				unknown++
			case cs.State.Running != nil:
				if cs.Started == nil || !*cs.Started {
					pendingInit++
				}
				running++
			case cs.State.Terminated != nil:
			case cs.State.Waiting != nil:
				if cs.LastTerminationState.Terminated == nil {
					pendingInit++
					waiting++
				}
			default:
				pendingInit++
				unknown++
			}
			continue
		}
		if !ok {
			pendingInit++
			continue
		}
		switch {
		case cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 {
					failedInit++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}
	for i := range spec.Containers {
		cs, ok := findStatus(s.ContainerStatuses, spec.Containers[i].Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 && spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 && !anyRegularContainerStarted(spec, s.ContainerStatuses), waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// anyRegularContainerStarted reports whether an app container runs or ran.
func anyRegularContainerStarted(spec *v1.PodSpec, statuses []v1.ContainerStatus) bool {
	for i := range spec.Containers {
		if cs, ok := findStatus(statuses, spec.Containers[i].Name); ok && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func containersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	var unknown, unready []string
	check := func(c *v1.Container) {
		if cs, ok := findStatus(statuses, c.Name); !ok {
			unknown = append(unknown, c.Name)
		} else if !cs.Ready {
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if isRestartableInit(&pod.Spec.InitContainers[i]) {
			check(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	cond := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		cond.Reason = ReasonPodCompleted
		return cond
	}
	if phase == v1.PodFailed {
		cond.Reason = ReasonPodFailed
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", unready))
	}
	if len(msgs) > 0 {
		cond.Reason = ReasonContainersNotReady
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

func podReadyCondition(pod *v1.Pod, conditions []v1.PodCondition, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(pod, statuses, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, rg := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range conditions {
			if conditions[i].Type == rg.ConditionType {
				found = &conditions[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), found.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

func initializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs, ok := findStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		done := cs.Ready
		if isRestartableInit(c) {
			done = cs.Started != nil && *cs.Started
		}
		if !done {
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: ReasonPodCompleted}
	}
	if anyRegularContainerStarted(&pod.Spec, statuses) {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %s", incomplete))
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: ReasonContainersNotInitialized, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
}

// QOSClass computes the pod's quality-of-service class from the cpu and
// memory requests and limits of its containers (init and app), as the
// kubelet's ComputePodQOS: BestEffort with none, Guaranteed when every
// container limits cpu and memory and the requests equal the limits,
// Burstable otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
	supported := func(n v1.ResourceName) bool { return n == v1.ResourceCPU || n == v1.ResourceMemory }
	add := func(l v1.ResourceList, n v1.ResourceName, q resource.Quantity) {
		d := q.DeepCopy()
		if cur, ok := l[n]; ok {
			d.Add(cur)
		}
		l[n] = d
	}
	all := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for i := range all {
		c := &all[i]
		for n, q := range c.Resources.Requests {
			if supported(n) && q.Sign() > 0 {
				add(requests, n, q)
			}
		}
		found := 0
		for n, q := range c.Resources.Limits {
			if supported(n) && q.Sign() > 0 {
				found++
				add(limits, n, q)
			}
		}
		if found < 2 {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for n, req := range requests {
			if lim, ok := limits[n]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}
