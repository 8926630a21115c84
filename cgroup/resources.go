package cgroup

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The kubelet's CPU constants (pkg/kubelet/cm/helpers_linux.go).
const (
	// MinShares and MaxShares bound cpu.shares, as the kernel does.
	MinShares = 2
	MaxShares = 262144
	// SharesPerCPU is the weight of one CPU's request.
	SharesPerCPU = 1024
	// QuotaPeriod is the CFS period in microseconds (100 ms).
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest CFS quota in microseconds (1 ms).
	MinQuotaPeriod = 1000
	// MaxWeight is the largest cgroup v2 cpu.weight.
	MaxWeight = 10000
)

// MilliCPUToShares converts a CPU request in millicores to cpu.shares: 0
// gives MinShares (the kernel's minimum, not its default of 1024), and the
// result is kept within [MinShares, MaxShares].
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	shares := milliCPU * SharesPerCPU / 1000
	if milliCPU > (1<<63-1)/SharesPerCPU || shares > MaxShares {
		return MaxShares
	}
	if shares < MinShares {
		return MinShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a CPU limit in millicores to a CFS quota in
// microseconds per period: 0 for no limit (0 millicores), at least
// MinQuotaPeriod otherwise.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	if milliCPU > (1<<63-1)/period {
		return 1<<63 - 1
	}
	quota := milliCPU * period / 1000
	if quota < MinQuotaPeriod {
		quota = MinQuotaPeriod
	}
	return quota
}

// CPUSharesToWeight converts cpu.shares to a cgroup v2 cpu.weight as the
// kubelet does: 1 + (shares - 2) × 9999 / 262142, so [2, 262144] maps onto
// [1, 10000]. Shares below 2 count as 2.
func CPUSharesToWeight(shares uint64) uint64 {
	if shares < MinShares {
		shares = MinShares
	}
	if shares >= MaxShares {
		return MaxWeight
	}
	return 1 + (shares-MinShares)*(MaxWeight-1)/(MaxShares-MinShares)
}

// CPUWeightToShares is the inverse of CPUSharesToWeight, used to read
// cpu.weight back as shares: the fewest shares that give weight, so that
// CPUSharesToWeight(CPUWeightToShares(w)) == w (the kubelet rounds down
// instead, which does not convert back).
func CPUWeightToShares(weight uint64) uint64 {
	if weight < 1 {
		weight = 1
	}
	if weight >= MaxWeight {
		return MaxShares
	}
	const num, den = MaxShares - MinShares, MaxWeight - 1
	return ((weight-1)*num+den-1)/den + MinShares
}

// ResourceConfigForPod computes the limits of a pod's cgroup as the
// kubelet's ResourceConfigForPod does, with the CFS period of 100 ms:
//
//   - requests and limits are summed over the app containers and
//     restartable init (sidecar) containers, and each non-restartable init
//     container counts with the sidecars started before it; the pod needs
//     the larger of that and the sum (the kubelet's PodRequests and
//     PodLimits); pod-level resources (spec.resources) replace the cpu and
//     memory sums when set; the pod overhead is added to the requests and
//     to the limits that are set;
//   - Guaranteed: cpu.shares from the cpu requests, CFS quota from the cpu
//     limits, memory limit;
//   - Burstable: cpu.shares; quota only when every container (and init
//     container) limits cpu, memory limit only when every one limits
//     memory, unless the pod-level limits set them;
//   - BestEffort: cpu.shares of MinShares, nothing else.
//
// With enforceCPULimits false the quota is -1 (no limit) where it would be
// set, as the kubelet does with --cpu-cfs-quota=false. The QoS class is
// the pod's status.qosClass when set, otherwise computed from its spec:
// from the pod-level resources when the pod has them, else
// runtime.QOSClass. MemoryMin and PidsLimit are left nil: the PodManager
// sets them from its options.
func ResourceConfigForPod(pod *v1.Pod, enforceCPULimits bool) *ResourceConfig {
	reqs := podRequests(pod)
	cpuLimitsDeclared, memoryLimitsDeclared := true, true
	limits := podLimits(pod, func(res v1.ResourceList) {
		if res.Cpu().IsZero() {
			cpuLimitsDeclared = false
		}
		if res.Memory().IsZero() {
			memoryLimitsDeclared = false
		}
	})
	if podLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimitsDeclared = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memoryLimitsDeclared = true
		}
	}

	var cpuRequests, cpuLimits, memoryLimits int64
	if q, ok := reqs[v1.ResourceCPU]; ok {
		cpuRequests = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceCPU]; ok {
		cpuLimits = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceMemory]; ok {
		memoryLimits = q.Value()
	}

	shares := MilliCPUToShares(cpuRequests)
	period := uint64(QuotaPeriod)
	quota := MilliCPUToQuota(cpuLimits, QuotaPeriod)
	if !enforceCPULimits {
		quota = -1
	}

	rc := &ResourceConfig{}
	switch PodQOSClass(pod) {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &memoryLimits
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if cpuLimitsDeclared {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if memoryLimitsDeclared {
			rc.Memory = &memoryLimits
		}
	default:
		minShares := uint64(MinShares)
		rc.CPUShares = &minShares
	}
	return rc
}

// PodQOSClass is the QoS class the pod's cgroup goes by: status.qosClass
// when set (the API server sets it once), otherwise computed from the
// spec, from the pod-level resources when the pod has any, else as
// runtime.QOSClass does from its containers (the kubelet's GetPodQOS).
func PodQOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	if pod.Spec.Resources == nil {
		return runtime.QOSClass(pod)
	}
	// The kubelet's ComputePodQOS with pod-level resources.
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	for n, q := range pod.Spec.Resources.Requests {
		if (n == v1.ResourceCPU || n == v1.ResourceMemory) && q.Sign() > 0 {
			requests[n] = q
		}
	}
	if len(pod.Spec.Resources.Limits) > 0 {
		for n, q := range pod.Spec.Resources.Limits {
			if (n == v1.ResourceCPU || n == v1.ResourceMemory) && q.Sign() > 0 {
				limits[n] = q
			}
		}
		if _, ok := limits[v1.ResourceCPU]; !ok {
			guaranteed = false
		}
		if _, ok := limits[v1.ResourceMemory]; !ok {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for n, req := range requests {
			if lim, ok := limits[n]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// PodRequests sums a pod's requests as the kubelet's PodRequests does (see
// ResourceConfigForPod), with pod-level resources and overhead.
func PodRequests(pod *v1.Pod) v1.ResourceList { return podRequests(pod) }

func podRequests(pod *v1.Pod) v1.ResourceList {
	reqs := aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }, nil)
	if pod.Spec.Resources != nil && podLevelSet(pod.Spec.Resources.Requests) {
		for n, q := range pod.Spec.Resources.Requests {
			if podLevelResource(n) {
				reqs[n] = q.DeepCopy()
			}
		}
	}
	if pod.Spec.Overhead != nil {
		addList(reqs, pod.Spec.Overhead)
	}
	return reqs
}

// podLimits sums a pod's limits as the kubelet's PodLimits does; each is
// called with the limits each container counts with.
func podLimits(pod *v1.Pod, each func(v1.ResourceList)) v1.ResourceList {
	limits := aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits }, each)
	if podLevelResourcesSet(pod) {
		for n, q := range pod.Spec.Resources.Limits {
			if podLevelResource(n) {
				limits[n] = q.DeepCopy()
			}
		}
	}
	for n, q := range pod.Spec.Overhead {
		if cur, ok := limits[n]; ok && !cur.IsZero() {
			cur.Add(q)
			limits[n] = cur
		}
	}
	return limits
}

// aggregate is the kubelet's aggregation of container resources: the sum
// of the app containers and sidecars, or the largest need of an init
// container (its own resources plus those of the sidecars started before
// it) when larger.
func aggregate(pod *v1.Pod, get func(*v1.Container) v1.ResourceList, each func(v1.ResourceList)) v1.ResourceList {
	result := v1.ResourceList{}
	for i := range pod.Spec.Containers {
		res := get(&pod.Spec.Containers[i])
		if each != nil {
			each(res)
		}
		addList(result, res)
	}
	sidecars := v1.ResourceList{}
	initMax := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		res := get(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addList(result, res)
			addList(sidecars, res)
			res = sidecars
		} else {
			combined := v1.ResourceList{}
			addList(combined, res)
			addList(combined, sidecars)
			res = combined
		}
		if each != nil {
			each(res)
		}
		maxList(initMax, res)
	}
	maxList(result, initMax)
	return result
}

func addList(list, add v1.ResourceList) {
	for n, q := range add {
		if cur, ok := list[n]; ok {
			cur.Add(q)
			list[n] = cur
		} else {
			list[n] = q.DeepCopy()
		}
	}
}

func maxList(list, other v1.ResourceList) {
	for n, q := range other {
		if cur, ok := list[n]; !ok || q.Cmp(cur) > 0 {
			list[n] = q.DeepCopy()
		}
	}
}

// podLevelResource reports whether spec.resources may set n (cpu, memory,
// hugepages-*).
func podLevelResource(n v1.ResourceName) bool {
	return n == v1.ResourceCPU || n == v1.ResourceMemory || strings.HasPrefix(string(n), v1.ResourceHugePagesPrefix)
}

func podLevelSet(l v1.ResourceList) bool {
	for n := range l {
		if podLevelResource(n) {
			return true
		}
	}
	return false
}

// podLevelResourcesSet is the kubelet's IsPodLevelResourcesSet.
func podLevelResourcesSet(pod *v1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && (podLevelSet(r.Requests) || podLevelSet(r.Limits))
}
