package status

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's smallest effective CPU request and limit, in millicores:
// values at or below them are reported as allocated.
const (
	minMilliCPURequest = 2
	minMilliCPULimit   = 10
)

// minShares is the smallest cpu.shares value (the kubelet's MinShares).
const minShares = 2

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

// PodCgroupState is a pod cgroup's cpu and memory as read (Current) and as
// the pod's allocated resources give them (Desired: the kubelet's
// ResourceConfigForPod).
type PodCgroupState struct {
	Current, Desired runtime.PodCgroupConfig
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
//   - resources: spec.resources with the pod's requests and limits
//     (podmodel.Requests, podmodel.Limits: the kubelet's
//     getEffectiveAllocatedResources), and, for a pod Running as its
//     source gives it (pod.Status.Phase, the kubelet's allocatedPod), the
//     cpu request (shares), cpu limit (CFS quota) and memory limit as its
//     cgroup has them (pc, when read): the cgroup's cpu request or limit
//     only when it or the allocated one is above the smallest effective
//     value (2m, 10m), the allocated value where the cgroup's is the one
//     it gives (the kubelet's "lossy v2 roundtrip" rule: a 50m request
//     reads back from a cgroup v2 weight as 28m). A value the cgroup lacks
//     (no quota, no memory limit, cgroup unread) is the allocated one.
func podResources(pod *v1.Pod, pc *PodCgroupState) (v1.ResourceList, *v1.ResourceRequirements) {
	alloc := podmodel.Requests(pod)
	res := pod.Spec.Resources.DeepCopy()
	if res == nil {
		res = &v1.ResourceRequirements{}
	}
	res.Requests = alloc.DeepCopy()
	res.Limits = podmodel.Limits(pod)
	if pod.Status.Phase != v1.PodRunning || pc == nil {
		return alloc, res
	}
	cur, want := pc.Current, pc.Desired
	if q := cgroupCPURequest(cur, want, res.Requests); q != nil &&
		(q.MilliValue() > minMilliCPURequest || res.Requests.Cpu().MilliValue() > minMilliCPURequest) {
		res.Requests[v1.ResourceCPU] = *q
	}
	if q := cgroupCPULimit(cur, want, res.Limits); q != nil &&
		(q.MilliValue() > minMilliCPULimit || res.Limits.Cpu().MilliValue() > minMilliCPULimit) {
		res.Limits[v1.ResourceCPU] = *q
	}
	if q := cgroupMemoryLimit(cur, want, res.Limits); q != nil {
		res.Limits[v1.ResourceMemory] = *q
	}
	return alloc, res
}

// cgroupCPURequest is the cpu request the pod cgroup's shares give (the
// kubelet's CPURequestsFromConfig: millicores, rounded up, of shares of at
// least 2), or the allocated one (alloc) when the shares are those it
// gives as cgroup v2 weights; nil when the cgroup has none.
func cgroupCPURequest(cur, want runtime.PodCgroupConfig, alloc v1.ResourceList) *resource.Quantity {
	if cur.CPUShares == nil || *cur.CPUShares < minShares {
		return nil
	}
	if a, ok := alloc[v1.ResourceCPU]; ok && want.CPUShares != nil &&
		!runtime.PodCgroupResized(runtime.PodCgroupConfig{CPUShares: cur.CPUShares}, runtime.PodCgroupConfig{CPUShares: want.CPUShares}) {
		return ptr(a.DeepCopy())
	}
	m := int64(math.Ceil(float64(*cur.CPUShares*1000) / 1024))
	return resource.NewMilliQuantity(m, resource.DecimalSI)
}

// cgroupCPULimit is the cpu limit the pod cgroup's CFS quota gives (the
// kubelet's CPULimitsFromConfig: quota × 1000 / period, 100ms when
// unknown), or the allocated one (limits) when the quota is the one it
// gives; nil without a quota or below one millicore.
func cgroupCPULimit(cur, want runtime.PodCgroupConfig, limits v1.ResourceList) *resource.Quantity {
	if cur.CPUQuota == nil || *cur.CPUQuota <= 0 {
		return nil
	}
	period := int64(100000)
	if cur.CPUPeriod != nil && *cur.CPUPeriod > 0 {
		period = int64(*cur.CPUPeriod)
	}
	m := *cur.CPUQuota * 1000 / period
	if m <= 0 {
		return nil
	}
	if a, ok := limits[v1.ResourceCPU]; ok && want.CPUQuota != nil &&
		!runtime.PodCgroupResized(runtime.PodCgroupConfig{CPUQuota: cur.CPUQuota, CPUPeriod: cur.CPUPeriod}, runtime.PodCgroupConfig{CPUQuota: want.CPUQuota, CPUPeriod: want.CPUPeriod}) {
		return ptr(a.DeepCopy())
	}
	return resource.NewMilliQuantity(m, resource.DecimalSI)
}

// cgroupMemoryLimit is the pod cgroup's memory limit (the kubelet's
// MemoryLimitsFromConfig), or the allocated one (limits) when it is the
// one they give; nil without a limit.
func cgroupMemoryLimit(cur, want runtime.PodCgroupConfig, limits v1.ResourceList) *resource.Quantity {
	if cur.Memory == nil || *cur.Memory <= 0 {
		return nil
	}
	if a, ok := limits[v1.ResourceMemory]; ok && want.Memory != nil &&
		!runtime.PodCgroupResized(runtime.PodCgroupConfig{Memory: cur.Memory}, runtime.PodCgroupConfig{Memory: want.Memory}) {
		return ptr(a.DeepCopy())
	}
	return resource.NewQuantity(*cur.Memory, resource.BinarySI)
}

func ptr[T any](v T) *T { return &v }

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
