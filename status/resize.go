package status

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's smallest effective CPU request and limit, in millicores:
// values at or below them are reported as allocated.
const (
	minMilliCPURequest = 2
	minMilliCPULimit   = 10
)

// allocatedResources is a container's status.allocatedResources: the
// requests allocated to it (its spec in Input.Pod), nil when it has none.
func allocatedResources(c *v1.Container) v1.ResourceList {
	if len(c.Resources.Requests) == 0 {
		return nil
	}
	return c.Resources.Requests.DeepCopy()
}

// containerStatusResources is a running container's status.resources, as
// the kubelet's convertContainerStatusResources builds it: CPU and memory
// limits as the runtime reports them (else the spec's, or the previous
// status's for the same instance), CPU request as the runtime reports it,
// memory and ephemeral-storage requests and the ephemeral-storage limit
// as allocated.
func containerStatusResources(c *v1.Container, cs *runtime.ContainerStatus, old *v1.ContainerStatus, containerID string) *v1.ResourceRequirements {
	if c == nil {
		return nil
	}
	var oldRes *v1.ResourceRequirements
	if old != nil && old.State.Running != nil && old.ContainerID == containerID {
		oldRes = old.Resources
	}
	fallback := func(name v1.ResourceName, spec v1.ResourceList, previous func(*v1.ResourceRequirements) v1.ResourceList, out v1.ResourceList) {
		if oldRes != nil {
			if q, ok := previous(oldRes)[name]; ok {
				out[name] = q.DeepCopy()
			}
			return
		}
		if q, ok := spec[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	limitsOf := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits }
	requestsOf := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	rr := cs.Resources
	if rr == nil {
		rr = &runtime.ContainerResources{}
	}
	out := &v1.ResourceRequirements{}
	if c.Resources.Limits != nil {
		out.Limits = v1.ResourceList{}
		switch spec, ok := c.Resources.Limits[v1.ResourceCPU]; {
		case rr.CPULimit != nil && ok && spec.MilliValue() <= minMilliCPULimit && rr.CPULimit.MilliValue() <= minMilliCPULimit:
			out.Limits[v1.ResourceCPU] = spec.DeepCopy()
		case rr.CPULimit != nil:
			out.Limits[v1.ResourceCPU] = rr.CPULimit.DeepCopy()
		default:
			fallback(v1.ResourceCPU, c.Resources.Limits, limitsOf, out.Limits)
		}
		if rr.MemoryLimit != nil {
			out.Limits[v1.ResourceMemory] = rr.MemoryLimit.DeepCopy()
		} else {
			fallback(v1.ResourceMemory, c.Resources.Limits, limitsOf, out.Limits)
		}
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
			out.Limits[v1.ResourceEphemeralStorage] = q.DeepCopy()
		}
	}
	if alloc := c.Resources.Requests; alloc != nil {
		out.Requests = v1.ResourceList{}
		switch spec, ok := alloc[v1.ResourceCPU]; {
		case rr.CPURequest != nil && ok && spec.MilliValue() <= minMilliCPURequest && rr.CPURequest.MilliValue() <= minMilliCPURequest:
			out.Requests[v1.ResourceCPU] = spec.DeepCopy()
		case rr.CPURequest != nil:
			out.Requests[v1.ResourceCPU] = rr.CPURequest.DeepCopy()
		default:
			fallback(v1.ResourceCPU, alloc, requestsOf, out.Requests)
		}
		for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceEphemeralStorage} {
			if q, ok := alloc[name]; ok {
				out.Requests[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// resizeConditions are the pod's resize conditions: PodResizePending as
// the agent decided it (Input.ResizePending), and PodResizeInProgress
// while a running app container's or sidecar's resources, as the runtime
// reports them, differ from those allocated to it, with reason Error and
// the message of the last failed attempt when the runtime has one.
// Neither once the pod is terminal.
func resizeConditions(in Input, rs *runtime.PodStatus, phase v1.PodPhase) []v1.PodCondition {
	if podmodel.IsTerminal(phase) {
		return nil
	}
	pod := in.Pod
	var out []v1.PodCondition
	if p := in.ResizePending; p != nil {
		c := *p
		c.Type, c.Status = v1.PodResizePending, v1.ConditionTrue
		out = append(out, c)
	}
	if !PodResizeInProgress(pod, rs, in.PodCgroup) {
		return out
	}
	c := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: pod.Generation}
	if re, ok := in.Waiting.(ResizeErrors); ok {
		if msg, ok := re.ResizeError(pod.UID); ok {
			c.Reason, c.Message = v1.PodReasonError, msg
		}
	}
	return append(out, c)
}

// PodCgroupState is a pod cgroup's configuration as read: Current and
// Desired (the pod's allocated resources as the kubelet's
// ResourceConfigForPod gives them) for a pod with pod-level resources,
// whose resize in place they tell; CPU and Memory, for a Running pod, are
// what its status.resources come from.
type PodCgroupState struct {
	Current, Desired runtime.PodCgroupConfig
	// CPU is the pod cgroup's cpu configuration as the kubelet's
	// GetPodCgroupConfig(pod, cpu) reads it: CPUShares (cgroup v2:
	// cpu.weight converted back to shares as the kubelet converts it,
	// rounded down: weight 2 is 28 shares), CPUQuota (-1: no limit) and
	// CPUPeriod. Nil when it could not be read.
	CPU *runtime.PodCgroupConfig
	// Memory is the pod cgroup's memory limit (Memory, -1: none) as
	// GetPodCgroupConfig(pod, memory) reads it. Nil when it could not be
	// read.
	Memory *runtime.PodCgroupConfig
}

// PodResizeInProgress reports whether a resize of the pod is not yet
// actuated: a container's (ResizeInProgress), or that of the pod-level
// resources (spec.resources, as allocated) while the pod cgroup, as read
// (pc, nil when unknown), does not have them.
func PodResizeInProgress(pod *v1.Pod, rs *runtime.PodStatus, pc *PodCgroupState) bool {
	if ResizeInProgress(pod, rs) {
		return true
	}
	return pc != nil && runtime.ResizeAllowed(pod) && podmodel.HasPodLevelResources(pod) &&
		runtime.PodCgroupResized(pc.Current, pc.Desired)
}

// podResources are the pod's status.allocatedResources and
// status.resources, as the kubelet's convertStatusToAPIStatus fills them
// for every pod, with or without pod-level resources
// (InPlacePodLevelResourcesVerticalScaling, on since 1.36):
//
//   - allocatedResources: the pod's requests (podmodel.Requests: the
//     containers' aggregated, pod-level requests in their place, the
//     overhead added);
//   - resources of a pod not Running as its source gives it
//     (pod.Status.Phase, the kubelet's allocatedPod): spec.resources with
//     the pod's aggregated requests and limits (podmodel.Requests,
//     podmodel.Limits: the kubelet's getEffectiveAllocatedResources);
//   - resources of a Running pod (the kubelet's
//     convertToAPIPodLevelResourcesStatus): spec.resources alone (the
//     pod-level resources, not the containers' aggregate), with the cpu
//     request its cgroup's shares give when they or the pod-level request
//     are above the smallest (2m), unless the shares are those the
//     pod-level request gives once written as a cgroup v2 weight and read
//     back (the "lossy v2 round trip": a 50m request reads back as 28m
//     and stays 50m); the memory request of the aggregate when
//     spec.resources has none; the cpu limit the cgroup's quota gives
//     when it or the pod-level limit is above the smallest (10m), and the
//     cgroup's memory limit. A value the cgroup lacks or could not be read
//     (pc.CPU, pc.Memory nil; no quota; no memory limit) is the one of the
//     previous status (old) when that was Running too, else left out.
func podResources(pod *v1.Pod, pc *PodCgroupState, old *v1.PodStatus) (v1.ResourceList, *v1.ResourceRequirements) {
	if (pod.Status.Phase != v1.PodRunning || pc == nil) && len(pod.Spec.Overhead) == 0 && noRequestsOrLimits(pod) {
		// What the aggregation below gives a pod that sets no requests or
		// limits, nor an overhead: empty lists.
		return v1.ResourceList{}, &v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	}
	alloc := podmodel.Requests(pod)
	res := pod.Spec.Resources.DeepCopy()
	if res == nil {
		res = &v1.ResourceRequirements{}
	}
	// Without a pod cgroup (cgroups off: pc nil), no cgroup holds other
	// values than the allocated ones, which a Running pod reports too.
	if pod.Status.Phase != v1.PodRunning || pc == nil {
		res.Requests = alloc.DeepCopy()
		res.Limits = podmodel.Limits(pod)
		return alloc, res
	}
	cpuCfg, memCfg := pc.CPU, pc.Memory
	cpuRequest := cpuRequestFromConfig(cpuCfg)
	cpuLimit := cpuLimitFromConfig(cpuCfg)
	memoryLimit := memoryLimitFromConfig(memCfg)
	var oldRes v1.ResourceRequirements
	if old != nil && old.Resources != nil {
		oldRes = *old.Resources
	}
	preserve := func(name v1.ResourceName, from, to v1.ResourceList) {
		if old != nil && old.Phase == v1.PodRunning && old.Resources != nil {
			if r, ok := from[name]; ok {
				to[name] = r.DeepCopy()
			}
		}
	}
	if res.Requests == nil {
		res.Requests = v1.ResourceList{}
	}
	if res.Limits == nil {
		res.Limits = v1.ResourceList{}
	}
	if cpuRequest != nil {
		if cpuRequest.MilliValue() > cgroup.MinShares || res.Requests.Cpu().MilliValue() > cgroup.MinShares {
			allocShares := cgroup.MilliCPUToShares(res.Requests.Cpu().MilliValue())
			if cpuCfg.CPUShares == nil || !cpuSharesEqualAfterV2RoundTrip(allocShares, *cpuCfg.CPUShares) {
				res.Requests[v1.ResourceCPU] = cpuRequest.DeepCopy()
			}
		}
	} else {
		preserve(v1.ResourceCPU, oldRes.Requests, res.Requests)
	}
	if _, ok := res.Requests[v1.ResourceMemory]; !ok {
		if v, ok := alloc[v1.ResourceMemory]; ok {
			res.Requests[v1.ResourceMemory] = v.DeepCopy()
		}
	}
	if cpuLimit != nil {
		if cpuLimit.MilliValue() > minMilliCPULimit || res.Limits.Cpu().MilliValue() > minMilliCPULimit {
			res.Limits[v1.ResourceCPU] = cpuLimit.DeepCopy()
		}
	} else {
		preserve(v1.ResourceCPU, oldRes.Limits, res.Limits)
	}
	if memoryLimit != nil {
		res.Limits[v1.ResourceMemory] = memoryLimit.DeepCopy()
	} else {
		preserve(v1.ResourceMemory, oldRes.Limits, res.Limits)
	}
	return alloc, res
}

// cpuRequestFromConfig is the cpu request a cgroup's shares give (the
// kubelet's CPURequestsFromConfig: millicores, rounded up, of shares of at
// least 2); nil without shares or below that.
func cpuRequestFromConfig(cfg *runtime.PodCgroupConfig) *resource.Quantity {
	if cfg == nil || cfg.CPUShares == nil || *cfg.CPUShares < cgroup.MinShares {
		return nil
	}
	m := int64(math.Ceil(float64(*cfg.CPUShares*1000) / 1024))
	if m <= 0 {
		return nil
	}
	return resource.NewMilliQuantity(m, resource.DecimalSI)
}

// cpuLimitFromConfig is the cpu limit a cgroup's CFS quota gives (the
// kubelet's CPULimitsFromConfig: quota × 1000 / period); nil without a
// period, without a quota (-1) or below one millicore.
func cpuLimitFromConfig(cfg *runtime.PodCgroupConfig) *resource.Quantity {
	if cfg == nil || cfg.CPUPeriod == nil || *cfg.CPUPeriod == 0 || cfg.CPUQuota == nil || *cfg.CPUQuota == -1 {
		return nil
	}
	m := *cfg.CPUQuota * 1000 / int64(*cfg.CPUPeriod)
	if m <= 0 {
		return nil
	}
	return resource.NewMilliQuantity(m, resource.DecimalSI)
}

// memoryLimitFromConfig is a cgroup's memory limit (the kubelet's
// MemoryLimitsFromConfig); nil without one.
func memoryLimitFromConfig(cfg *runtime.PodCgroupConfig) *resource.Quantity {
	if cfg == nil || cfg.Memory == nil || *cfg.Memory <= 0 {
		return nil
	}
	return resource.NewQuantity(*cfg.Memory, resource.BinarySI)
}

// cpuSharesEqualAfterV2RoundTrip is the kubelet's function of that name:
// whether readback is allocated written as a cgroup v2 cpu.weight and
// read back as shares, rounded down as the kubelet reads them.
func cpuSharesEqualAfterV2RoundTrip(allocated, readback uint64) bool {
	return cgroup.SharesAfterV2RoundTrip(allocated) == readback
}

// ResizeInProgress reports whether a running app container or
// restartable init container (sidecar) of the current sandbox has
// resources, as the runtime reports them, other than those of its spec
// (the allocated resources): a resize is not yet actuated.
func ResizeInProgress(pod *v1.Pod, rs *runtime.PodStatus) bool {
	if !runtime.ResizeAllowed(pod) {
		return false
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if podmodel.IsRestartableInit(c) && runtime.ContainerResized(c, rs.FindActiveContainerStatusByName(c.Name)) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if runtime.ContainerResized(c, rs.FindActiveContainerStatusByName(c.Name)) {
			return true
		}
	}
	return false
}
