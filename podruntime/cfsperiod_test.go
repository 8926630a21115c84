package podruntime

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestCFSQuotaPeriod: a container's CRI cpu period is the sync's
// CPUCFSQuotaPeriod, its pod cgroup's (100ms by default, and in place of
// a value out of 1ms..1s), and its quota the CPU limit's share of it.
func TestCFSQuotaPeriod(t *testing.T) {
	for _, tc := range []struct {
		period             time.Duration
		wantPeriod, wantQt int64
	}{
		{0, 100000, 50000}, {50 * time.Millisecond, 50000, 25000}, {time.Second, 1000000, 500000},
		{time.Microsecond, 100000, 50000}, {2 * time.Second, 100000, 50000}, {-time.Second, 100000, 50000},
	} {
		f := newFakes(t, Options{})
		pod := testPod("cfs", "a")
		pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: mustQuantity("500m")}
		opts := SyncPodOptions{Unhealthy: f.unhealthy, CPUCFSQuotaPeriod: tc.period}
		if err := f.m.SyncPodWithOptions(t.Context(), pod, f.status(t, pod), opts).Err(); err != nil {
			t.Fatal(err)
		}
		r := f.rec.lastContainerConfig("a").GetLinux().GetResources()
		if r.GetCpuPeriod() != tc.wantPeriod || r.GetCpuQuota() != tc.wantQt {
			t.Errorf("period %s: cpu period %d quota %d, want %d %d", tc.period, r.GetCpuPeriod(), r.GetCpuQuota(), tc.wantPeriod, tc.wantQt)
		}
	}
}
