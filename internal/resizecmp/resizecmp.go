// Package resizecmp holds the comparisons of an in-place resize, shared by
// the status (is a resize done?) and the pod runtime (what to change): a
// container's cpu and memory as its spec and as the runtime give them, in
// the units and with the smallest effective values the kubelet compares,
// and the pod cgroup's values. Every function is pure.
package resizecmp

import (
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The kubelet's smallest effective CPU values: requests of at most
// MinShares millicores all give 2 shares, limits of at most
// MinMilliCPULimit all give the minimum quota.
const (
	MinShares        = 2
	MinMilliCPULimit = 10
)

// Values are a container's cpu and memory in the units a resize compares:
// millicores and bytes.
type Values struct {
	MemoryLimit   int64
	MemoryRequest int64
	CPULimit      int64
	CPURequest    int64
}

// Desired are the container's values as its spec (the allocated
// resources) gives them; a CPU limit without request requests the limit,
// as the container was created.
func Desired(c *v1.Container) Values {
	d := Values{
		MemoryLimit:   c.Resources.Limits.Memory().Value(),
		MemoryRequest: c.Resources.Requests.Memory().Value(),
		CPULimit:      c.Resources.Limits.Cpu().MilliValue(),
		CPURequest:    c.Resources.Requests.Cpu().MilliValue(),
	}
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok && d.CPULimit != 0 {
		d.CPURequest = d.CPULimit
	}
	return d
}

// Actual are the values the runtime reports (nil where it reports none);
// the memory request, which no cgroup holds, is taken from desired.
func Actual(cpuRequest, cpuLimit, memoryLimit *resource.Quantity, desired Values) Values {
	a := Values{MemoryRequest: desired.MemoryRequest}
	if memoryLimit != nil {
		a.MemoryLimit = memoryLimit.Value()
	}
	if cpuLimit != nil {
		a.CPULimit = cpuLimit.MilliValue()
	}
	if cpuRequest != nil {
		a.CPURequest = cpuRequest.MilliValue()
	}
	return a
}

// SameEffective makes the desired values equal the actual ones where the
// difference has no effect: both requests at or below the minimum shares,
// both limits at or below the minimum quota.
func SameEffective(desired, actual Values) Values {
	if desired.CPURequest <= MinShares && actual.CPURequest <= MinShares {
		desired.CPURequest = actual.CPURequest
	}
	if desired.CPULimit <= MinMilliCPULimit && actual.CPULimit <= MinMilliCPULimit {
		desired.CPULimit = actual.CPULimit
	}
	return desired
}

// QuotaMilli is a CFS quota in millicores of its period (100ms when
// unknown); no limit is the largest value.
func QuotaMilli(quota *int64, period *uint64) int64 {
	if *quota < 0 {
		return math.MaxInt64
	}
	p := uint64(100000)
	if period != nil && *period > 0 {
		p = *period
	}
	return *quota * 1000 / int64(p)
}

// SharesToWeight is the cgroup v2 cpu.weight of cpu.shares (the runc and
// kubelet conversion).
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	if shares <= MinShares {
		return 1
	}
	return 1 + ((shares-MinShares)*9999)/262142
}

// LimitValue orders limits: no limit (-1 or unknown) above any value.
func LimitValue(p *int64) int64 {
	if p == nil || *p < 0 {
		return math.MaxInt64
	}
	return *p
}
