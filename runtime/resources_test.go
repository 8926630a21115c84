package runtime

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerResourcesFromCRI: shares round up to millicores, quota over
// period gives the limit, unset or unlimited values give none.
func TestContainerResourcesFromCRI(t *testing.T) {
	got := containerResourcesFromCRI(&runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
		CpuShares: 102, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20,
	}})
	if got.CPURequest.MilliValue() != 100 || got.CPULimit.MilliValue() != 500 || got.MemoryLimit.Value() != 128<<20 {
		t.Errorf("got request %v limit %v memory %v", got.CPURequest, got.CPULimit, got.MemoryLimit)
	}
	got = containerResourcesFromCRI(&runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuQuota: -1, CpuPeriod: 100000}})
	if got.CPURequest != nil || got.CPULimit != nil || got.MemoryLimit != nil {
		t.Errorf("unlimited: got %+v", got)
	}
	if containerResourcesFromCRI(nil) != nil {
		t.Error("no resources: want nil")
	}
}
