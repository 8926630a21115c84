package status

import (
	v1 "k8s.io/api/core/v1"

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
	if !ResizeInProgress(pod, rs) {
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
