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

// podLevelResources are the pod's status.allocatedResources and
// status.resources, as the kubelet fills them for a pod with pod-level
// resources (InPlacePodLevelResourcesVerticalScaling): the requests
// allocated to the pod (its pod-level requests, podmodel.Requests); and
// the pod-level resources allocated, their cpu and memory limits and cpu
// request as the pod cgroup has them (pc, when read; the allocated values
// where the cgroup's differ from them only below the kernel's
// granularity: cgroup v2 weights, the smallest quota). Nil for a pod
// without pod-level resources.
func podLevelResources(pod *v1.Pod, pc *PodCgroupState) (v1.ResourceList, *v1.ResourceRequirements) {
	if !podmodel.HasPodLevelResources(pod) {
		return nil, nil
	}
	alloc := podmodel.Requests(pod)
	res := pod.Spec.Resources.DeepCopy()
	if pc == nil {
		return alloc, res
	}
	cur, want := pc.Current, pc.Desired
	if q, ok := res.Limits[v1.ResourceMemory]; ok && cur.Memory != nil && *cur.Memory >= 0 && q.Value() != *cur.Memory {
		res.Limits[v1.ResourceMemory] = *resource.NewQuantity(*cur.Memory, resource.BinarySI)
	}
	if _, ok := res.Limits[v1.ResourceCPU]; ok && cur.CPUQuota != nil && *cur.CPUQuota > 0 &&
		runtime.PodCgroupResized(runtime.PodCgroupConfig{CPUQuota: cur.CPUQuota, CPUPeriod: cur.CPUPeriod}, runtime.PodCgroupConfig{CPUQuota: want.CPUQuota, CPUPeriod: want.CPUPeriod}) {
		period := int64(100000)
		if cur.CPUPeriod != nil && *cur.CPUPeriod > 0 {
			period = int64(*cur.CPUPeriod)
		}
		res.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(*cur.CPUQuota*1000/period, resource.DecimalSI)
	}
	if _, ok := res.Requests[v1.ResourceCPU]; ok && cur.CPUShares != nil &&
		runtime.PodCgroupResized(runtime.PodCgroupConfig{CPUShares: cur.CPUShares}, runtime.PodCgroupConfig{CPUShares: want.CPUShares}) {
		m := int64(math.Ceil(float64(*cur.CPUShares*1000) / 1024))
		res.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	return alloc, res
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
