package status

import v1 "k8s.io/api/core/v1"

// MaxPodTerminationMessageLength is the most the termination messages of
// one pod's containers may hold together, the kubelet's: each container's
// terminated state (and last termination state) keeps at most this much
// divided by the number of init and app containers, the first bytes.
const MaxPodTerminationMessageLength = 12 << 10

// truncateTerminationMessages cuts the terminated states' messages to the
// pod's budget, as the kubelet's status manager does before it reports a
// status.
func truncateTerminationMessages(pod *v1.Pod, s *v1.PodStatus) {
	per := MaxPodTerminationMessageLength
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
		per /= n
	}
	cut := func(t *v1.ContainerStateTerminated) {
		if t != nil && len(t.Message) > per {
			t.Message = t.Message[:per]
		}
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			cut(list[i].State.Terminated)
			cut(list[i].LastTerminationState.Terminated)
		}
	}
}

// truncationNeeded reports whether truncateTerminationMessages would cut a
// message of s.
func truncationNeeded(pod *v1.Pod, s *v1.PodStatus) bool {
	per := MaxPodTerminationMessageLength
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
		per /= n
	}
	long := func(t *v1.ContainerStateTerminated) bool { return t != nil && len(t.Message) > per }
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			if long(list[i].State.Terminated) || long(list[i].LastTerminationState.Terminated) {
				return true
			}
		}
	}
	return false
}
