package podmodel

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The condition reasons of the kubelet's status generator.
const (
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// ReasonRestartingAllContainers is the reason of the terminated state of a
// container removed by a RestartAllContainers action: such a container
// counts as restarting whatever its restart policy.
const ReasonRestartingAllContainers = "RestartingAllContainers"

// Phase computes the pod's phase from the container statuses of s, as
// the kubelet's getPhase (v1.37, ContainerRestartRules and
// RestartAllContainersOnContainerExits on): a regular init container not
// yet succeeded keeps the pod Pending, and so does a sidecar not yet
// started unless the pod was initialized (podHasInitialized: an app
// container has an instance in the current sandbox); a failed init
// container its restart rules and policy do not restart fails the pod;
// then Running while any container runs, and once all stopped: Running
// while one of them will restart (per its restart rules, its own restart
// policy, else the pod's), else Succeeded when all exited 0 and Failed
// otherwise. podIsTerminal marks a pod whose containers will not run
// again whatever their restart policies (it was killed for good).
func Phase(pod *v1.Pod, s *v1.PodStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := &pod.Spec
	restartable := func(c *v1.Container, t *v1.ContainerStateTerminated) bool {
		return ContainerShouldRestart(c, spec, t.ExitCode) || t.Reason == ReasonRestartingAllContainers
	}
	pendingRegularInit, pendingSidecar, failedInitNotRestartable := 0, 0, 0
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		cs, ok := findStatus(s.InitContainerStatuses, c.Name)
		if IsRestartableInit(c) {
			switch {
			case !ok:
				unknown++
			case cs.State.Running != nil:
				if cs.Started == nil || !*cs.Started {
					pendingSidecar++
				}
				running++
			case cs.State.Terminated != nil:
			case cs.State.Waiting != nil:
				if cs.LastTerminationState.Terminated == nil {
					pendingSidecar++
					waiting++
				}
			default:
				pendingSidecar++
				unknown++
			}
			continue
		}
		if !ok {
			pendingRegularInit++
			continue
		}
		switch {
		case cs.State.Running != nil:
			pendingRegularInit++
		case cs.State.Terminated != nil:
			if t := cs.State.Terminated; t.ExitCode != 0 && !restartable(c, t) {
				failedInitNotRestartable++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 && !restartable(c, t) {
					failedInitNotRestartable++
				}
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		cs, ok := findStatus(s.ContainerStatuses, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if !restartable(c, cs.State.Terminated) {
				stoppedNotRestartable++
			}
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				stopped++
				if !restartable(c, t) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInitNotRestartable > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingRegularInit > 0, pendingSidecar > 0 && !podHasInitialized, waiting > 0:
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
		if stopped != stoppedNotRestartable {
			return v1.PodRunning // at least one container restarts
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
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

// ContainersReadyCondition is the kubelet's ContainersReady condition of
// the pod with these container statuses (init and app) in this phase.
func ContainersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	var unknown, unready []string
	check := func(c *v1.Container) {
		if cs, ok := findStatus(statuses, c.Name); !ok {
			unknown = append(unknown, c.Name)
		} else if !cs.Ready {
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if IsRestartableInit(&pod.Spec.InitContainers[i]) {
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

// ReadyCondition is the kubelet's Ready condition: ContainersReady, and
// every readiness gate's condition (among conditions) True.
func ReadyCondition(pod *v1.Pod, conditions []v1.PodCondition, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := ContainersReadyCondition(pod, statuses, phase)
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

// ReadinessNeedsReconcile reports whether the Ready condition of pod, as
// its source holds it (the API server's copy), disagrees in status or
// message with what the pod's own conditions make it: the pod has
// readiness gates and another writer changed their conditions. The
// kubelet syncs such a pod when its source reports the status change
// (NeedToReconcilePodReadiness), so that Ready follows the gates at once
// rather than at the next periodic sync.
func ReadinessNeedsReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	var cur *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			cur = &pod.Status.Conditions[i]
		}
	}
	if cur == nil {
		return false
	}
	all := append(slices.Clip(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	want := ReadyCondition(pod, pod.Status.Conditions, all, pod.Status.Phase)
	return cur.Status != want.Status || cur.Message != want.Message
}

// InitializedCondition is the kubelet's Initialized condition: every
// init container done (succeeded, or a sidecar started), or an app
// container started already. A pod once initialized (wasInitialized: the
// condition was True in the previous status) stays so while its
// containers restart in place (RestartAllContainers).
func InitializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase, wasInitialized bool) v1.PodCondition {
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs, ok := findStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		done := cs.Ready
		if IsRestartableInit(c) {
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
		if wasInitialized {
			return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
		}
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: ReasonContainersNotInitialized, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
}

// findStatus returns the status of the named container.
func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}
