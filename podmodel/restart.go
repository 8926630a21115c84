package podmodel

import (
	v1 "k8s.io/api/core/v1"
)

// ContainerShouldRestart reports whether a container that exited with
// exitCode is started again, as the kubelet decides it with
// ContainerRestartRules and RestartAllContainersOnContainerExits on (the
// default since 1.35 and 1.36): with a container-level restartPolicy, the
// first of its restartPolicyRules that matches the exit code decides
// (Restart and RestartAllContainers both restart), else the container's
// restartPolicy; without one, the pod's restartPolicy (Always when unset).
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := MatchingRestartRule(c, exitCode); ok {
			switch rule.Action {
			case v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers:
				return true
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true
}

// MatchingRestartRule returns the first of the container's
// restartPolicyRules whose exit-code requirement (In or NotIn the values)
// the exit code meets. Rules with another operator, or without exitCodes,
// never match.
func MatchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := false
		for _, v := range rule.ExitCodes.Values {
			if v == exitCode {
				in = true
				break
			}
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// TriggersRestartAll reports whether the container exiting with exitCode
// restarts every container of the pod: its first matching rule's action
// is RestartAllContainers.
func TriggersRestartAll(c *v1.Container, exitCode int32) bool {
	rule, ok := MatchingRestartRule(c, exitCode)
	return ok && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers
}

// IsContainerRestartable reports whether the container may run again after
// it exits: a container-level rule with the Restart action, else its
// restartPolicy is not Never; without a container-level restartPolicy,
// the pod's is not Never.
func IsContainerRestartable(spec *v1.PodSpec, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		for _, rule := range c.RestartPolicyRules {
			if rule.Action == v1.ContainerRestartRuleActionRestart {
				return true
			}
		}
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// AllContainersCouldRestart reports whether any container (init or app)
// has a rule with the RestartAllContainers action: only such pods carry
// the AllContainersRestarting condition.
func AllContainersCouldRestart(spec *v1.PodSpec) bool {
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, rule := range list[i].RestartPolicyRules {
				if rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// AllContainersRestarting reports whether the pod's API status s has the
// AllContainersRestarting condition True: its sync then removes every
// container so that the pod starts over in its sandbox.
func AllContainersRestarting(s v1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == v1.AllContainersRestarting && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// RestartAllRequested reports whether the pod's API status s asks for all
// its containers to restart in place: its AllContainersRestarting
// condition is True, or a container's status is terminated with an exit
// code whose first matching rule is RestartAllContainers (the part of the
// kubelet's ShouldAllContainersRestart that reads the API status).
func RestartAllRequested(pod *v1.Pod, s *v1.PodStatus) bool {
	if s == nil {
		return false
	}
	if AllContainersRestarting(*s) {
		return true
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Terminated == nil {
				continue
			}
			if c := FindContainer(pod, cs.Name); c != nil && TriggersRestartAll(c, cs.State.Terminated.ExitCode) {
				return true
			}
		}
	}
	return false
}
