package nodekit

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/status"
)

// statusPodCgroup reads the pod cgroup a pod's API status needs: that of a
// pod with pod-level resources (its PodResizeInProgress, podCgroupState),
// and that of any pod Running as its source gives it (pod.Status.Phase),
// whose status.resources are the cgroup's cpu and memory, as the kubelet's
// convertToAPIPodLevelResourcesStatus reads them for every Running pod.
// Nil otherwise, when cgroups are off, or when the cgroup cannot be read.
func statusPodCgroup(c PodCgroups, pod *v1.Pod) *status.PodCgroupState {
	if podmodel.HasPodLevelResources(pod) {
		st := podCgroupState(c, pod)
		if st != nil {
			st.CPU, st.Memory = &st.Current, &st.Current
		}
		return st
	}
	if pod.Status.Phase != v1.PodRunning {
		return nil
	}
	pc := podCgroupFor(c)
	if pc == nil {
		return nil
	}
	cur, _, err := pc.Current(pod)
	if err != nil {
		return nil
	}
	return &status.PodCgroupState{CPU: &cur, Memory: &cur}
}
