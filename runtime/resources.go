package runtime

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/resizecmp"
	"github.com/nodekit/nodekit/podmodel"
)

// ContainerResources are a running container's resources as the runtime
// reports them (CRI ContainerStatus.resources.linux): nil where it
// reports none.
type ContainerResources struct {
	// CPURequest from the CPU shares.
	CPURequest *resource.Quantity
	// CPULimit from the CFS quota and period.
	CPULimit *resource.Quantity
	// MemoryLimit in bytes.
	MemoryLimit *resource.Quantity
}

// containerResourcesFromCRI converts the runtime's report as the kubelet
// does: shares to millicores rounded up, quota/period to millicores, no
// value for an unset or unlimited field.
func containerResourcesFromCRI(r *runtimeapi.ContainerResources) *ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	out := &ContainerResources{}
	if l.GetCpuPeriod() > 0 && l.GetCpuQuota() > 0 {
		if m := l.GetCpuQuota() * 1000 / l.GetCpuPeriod(); m > 0 {
			out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if s := l.GetCpuShares(); s >= resizecmp.MinShares {
		m := int64(math.Ceil(float64(s*1000) / 1024))
		out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if b := l.GetMemoryLimitInBytes(); b > 0 {
		out.MemoryLimit = resource.NewQuantity(b, resource.BinarySI)
	}
	return out
}

// ContainerResized reports whether a running container's resources, as the
// runtime reports them, differ from its spec's (the allocated resources):
// its resize is not done. A container whose runtime reports no resources
// counts as done, there being nothing to compare.
func ContainerResized(c *v1.Container, cs *ContainerStatus) bool {
	if cs == nil || cs.State != ContainerStateRunning || cs.Resources == nil {
		return false
	}
	desired := resizecmp.Desired(c)
	actual := resizecmp.Actual(cs.Resources.CPURequest, cs.Resources.CPULimit, cs.Resources.MemoryLimit, desired)
	return resizecmp.SameEffective(desired, actual) != actual
}

// PodCgroupConfig is the part of a pod cgroup's configuration a resize
// changes; nil fields are not set (or, read, not known). CPUQuota and
// Memory are -1 for no limit.
type PodCgroupConfig struct {
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
}

// PodCgroupResized reports whether the pod cgroup's cpu and memory as read
// (cur) differ from those its allocated resources give it (want): its
// resize is not done. A field unknown on either side is not compared. CPU
// shares compare as cgroup v2 weights, the only value cgroup v2 keeps;
// CPU quotas compare as millicores of their period, a quota at or below
// the smallest effective limit as any other such.
func PodCgroupResized(cur, want PodCgroupConfig) bool {
	if cur.Memory != nil && want.Memory != nil && resizecmp.LimitValue(cur.Memory) != resizecmp.LimitValue(want.Memory) {
		return true
	}
	if cur.CPUShares != nil && want.CPUShares != nil && resizecmp.SharesToWeight(*cur.CPUShares) != resizecmp.SharesToWeight(*want.CPUShares) {
		return true
	}
	if cur.CPUQuota != nil && want.CPUQuota != nil {
		c, w := resizecmp.QuotaMilli(cur.CPUQuota, cur.CPUPeriod), resizecmp.QuotaMilli(want.CPUQuota, want.CPUPeriod)
		if c != w && !(c <= resizecmp.MinMilliCPULimit && w <= resizecmp.MinMilliCPULimit) {
			return true
		}
	}
	return false
}

// ResizeAllowed reports whether the pod may be resized in place: not a
// static pod (the kubelet's IsInPlacePodVerticalScalingAllowed).
func ResizeAllowed(pod *v1.Pod) bool { return !podmodel.IsStatic(pod) }
