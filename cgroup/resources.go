package cgroup

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podmodel"
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
//   - requests and limits are podmodel.Requests and podmodel.Limits
//     (sidecars, init containers, pod-level resources, overhead);
//   - Guaranteed: cpu.shares from the cpu requests, CFS quota from the cpu
//     limits, memory limit;
//   - Burstable: cpu.shares; quota only when every container (and init
//     container) limits cpu, memory limit only when every one limits
//     memory, unless the pod-level limits set them
//     (podmodel.LimitsDeclared);
//   - BestEffort: cpu.shares of MinShares;
//   - every class: the hugetlb limits of the pod's hugepages requests
//     (HugePageLimits; a size limited but not requested counts its limit,
//     the API's default of requests), every other page size limited to 0.
//
// With enforceCPULimits false the quota is -1 (no limit) where it would be
// set, as the kubelet does with --cpu-cfs-quota=false. The QoS class is
// podmodel.QOSClass. MemoryMin and PidsLimit are left nil: the PodManager
// sets them from its options.
func ResourceConfigForPod(pod *v1.Pod, enforceCPULimits bool) *ResourceConfig {
	return ResourceConfigForPodWithPeriod(pod, enforceCPULimits, QuotaPeriod*time.Microsecond)
}

// ResourceConfigForPodWithPeriod is ResourceConfigForPod with the CFS
// period given (the kubelet's --cpu-cfs-quota-period): the quota is the
// CPU limit's share of that period, at least MinQuotaPeriod. A period of 0
// is QuotaPeriod.
func ResourceConfigForPodWithPeriod(pod *v1.Pod, enforceCPULimits bool, cfsPeriod time.Duration) *ResourceConfig {
	reqs := podmodel.Requests(pod)
	limits := podmodel.Limits(pod)
	cpuLimitsDeclared, memoryLimitsDeclared := podmodel.LimitsDeclared(pod)

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
	if us := cfsPeriod.Microseconds(); us > 0 {
		period = uint64(us)
	}
	quota := MilliCPUToQuota(cpuLimits, int64(period))
	if !enforceCPULimits {
		quota = -1
	}

	rc := &ResourceConfig{}
	switch podmodel.QOSClass(pod) {
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
	rc.HugePageLimits = HugePageLimits(reqs)
	for size, l := range HugePageLimits(limits) {
		if _, ok := rc.HugePageLimits[size]; !ok {
			rc.HugePageLimits[size] = l
		}
	}
	return rc
}
