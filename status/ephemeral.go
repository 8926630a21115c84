package status

import (
	v1 "k8s.io/api/core/v1"
)

// ephemeralStatuses are the statuses of the pod's ephemeral containers
// (kubectl debug), as the kubelet's: converted as app containers are
// (Waiting with ContainerCreating, or PodInitializing in a pod with init
// containers, until an instance exists; then Running, then Terminated,
// which stays), listed by name. They count in neither the phase nor the
// conditions. No probe runs in an ephemeral container: Ready is false and
// Started unset.
func (cv *converter) ephemeralStatuses(old []v1.ContainerStatus) []v1.ContainerStatus {
	pod := cv.in.Pod
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	specs := make([]v1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		specs[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	out := cv.statuses(specs, old, false)
	for i := range out {
		out[i].Ready = false
		out[i].Started = nil
	}
	return out
}
