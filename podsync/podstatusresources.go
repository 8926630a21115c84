package podsync

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
)

// podStatusConfigReader is the cgroup.PodManager as a pod's status reads
// its cgroup: the cpu files and the memory limit alone.
type podStatusConfigReader interface {
	PodStatusConfig(pod *v1.Pod) cgroup.PodStatusConfig
}

// statusPodCgroup reads the pod cgroup a pod's API status needs: that of
// any pod Running as its source gives it (pod.Status.Phase), whose
// status.resources are the cgroup's cpu and memory as the kubelet's
// convertToAPIPodLevelResourcesStatus reads them (GetPodCgroupConfig: the
// cpu files and the memory limit, each on its own, no usage), and that of
// a pod with pod-level resources, whose PodResizeInProgress compares the
// same read with the configuration its allocated resources give. Nil
// when neither applies or cgroups are off.
func statusPodCgroup(c PodCgroups, pod *v1.Pod) *status.PodCgroupState {
	podLevel := podmodel.HasPodLevelResources(pod)
	if !podLevel && pod.Status.Phase != v1.PodRunning {
		return nil
	}
	pc := podCgroupFor(c)
	if pc == nil {
		return nil
	}
	r, ok := c.(podStatusConfigReader)
	if !ok {
		if podLevel {
			return PodCgroupState(c, pod)
		}
		cur, _, err := pc.Current(pod)
		if err != nil {
			return nil
		}
		return &status.PodCgroupState{CPU: &cur, Memory: &cur}
	}
	read := r.PodStatusConfig(pod)
	st := &status.PodCgroupState{}
	if read.CPUErr == nil {
		st.CPU = &runtime.PodCgroupConfig{CPUShares: read.CPU.CPUShares, CPUQuota: read.CPU.CPUQuota, CPUPeriod: read.CPU.CPUPeriod}
	}
	if read.MemoryErr == nil {
		st.Memory = &runtime.PodCgroupConfig{Memory: read.Memory.Memory}
	}
	if podLevel && st.CPU != nil && st.Memory != nil {
		// The resize comparison takes cgroup v2 weights as the fewest
		// shares giving them, which convert back to the same weight.
		shares := st.CPU.CPUShares
		if read.CPUWeight != 0 {
			s := cgroup.CPUWeightToShares(read.CPUWeight)
			shares = &s
		}
		st.Current = runtime.PodCgroupConfig{CPUShares: shares, CPUQuota: st.CPU.CPUQuota, CPUPeriod: st.CPU.CPUPeriod, Memory: st.Memory.Memory}
		st.Desired = pc.Desired(pod)
	}
	return st
}
