package podruntime

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestCFSQuotaPeriod: a container's CRI cpu period is the Manager's
// CPUCFSQuotaPeriod (100ms by default) and its quota the CPU limit's share
// of it.
func TestCFSQuotaPeriod(t *testing.T) {
	for _, tc := range []struct {
		period             time.Duration
		wantPeriod, wantQt int64
	}{{0, 100000, 50000}, {50 * time.Millisecond, 50000, 25000}, {time.Second, 1000000, 500000}} {
		f := newFakes(t, Options{CPUCFSQuotaPeriod: tc.period})
		pod := testPod("cfs", "a")
		pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: mustQuantity("500m")}
		if err := f.sync(t, pod).Err(); err != nil {
			t.Fatal(err)
		}
		r := f.rec.lastContainerConfig("a").GetLinux().GetResources()
		if r.GetCpuPeriod() != tc.wantPeriod || r.GetCpuQuota() != tc.wantQt {
			t.Errorf("period %s: cpu period %d quota %d, want %d %d", tc.period, r.GetCpuPeriod(), r.GetCpuQuota(), tc.wantPeriod, tc.wantQt)
		}
	}
	f := newFakes(t, Options{})
	for _, p := range []time.Duration{time.Microsecond, 2 * time.Second, -time.Second} {
		if _, err := New(f.rec, f.is, Options{CPUCFSQuotaPeriod: p}); err == nil {
			t.Errorf("CPUCFSQuotaPeriod %s accepted", p)
		}
	}
}
