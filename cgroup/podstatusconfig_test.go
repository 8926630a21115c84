package cgroup_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/cgroup/cgrouptest"
)

// TestPodStatusConfig: the pod cgroup's cpu and memory configuration as
// the kubelet reads it for the status (cgroup v2 weights as shares
// rounded down: 500m is 512 shares, weight 20, read back as 500), each
// read on its own, with only the cpu and memory limit files there.
func TestPodStatusConfig(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	type want struct {
		cpu    *cgroup.ResourceConfig
		weight uint64
		memory *cgroup.ResourceConfig
	}
	for _, tt := range []struct {
		name            string
		root            func(testing.TB) string
		cpuDir, memDir  string // the hierarchies of cpu and memory
		cpuFile, memory string // a cpu file and the memory limit file
		guaranteed      want   // gPod: 500m, 64Mi
		burstable       want   // bPod: no limits
	}{
		{"v1", func(t testing.TB) string { return cgrouptest.V1(t) }, "cpu", "memory", "cpu.shares", "memory.limit_in_bytes",
			want{&cgroup.ResourceConfig{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000)}, 0, &cgroup.ResourceConfig{Memory: i64(64 << 20)}},
			want{&cgroup.ResourceConfig{CPUShares: u64(256), CPUQuota: i64(-1), CPUPeriod: u64(100000)}, 0, &cgroup.ResourceConfig{Memory: i64(-1)}}},
		{"v2", func(t testing.TB) string { return cgrouptest.V2(t) }, "", "", "cpu.weight", "memory.max",
			want{&cgroup.ResourceConfig{CPUShares: u64(500), CPUQuota: i64(50000), CPUPeriod: u64(100000)}, 20, &cgroup.ResourceConfig{Memory: i64(64 << 20)}},
			want{&cgroup.ResourceConfig{CPUShares: u64(237), CPUQuota: i64(-1), CPUPeriod: u64(100000)}, 10, &cgroup.ResourceConfig{Memory: i64(-1)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.root(t)
			pm := newPM(t, cgroup.PodManagerOptions{CgroupfsRoot: root})
			if err := pm.EnsureNode(); err != nil {
				t.Fatalf("EnsureNode: %v", err)
			}
			check := func(label string, got cgroup.PodStatusConfig, w want) {
				t.Helper()
				if got.CPUErr != nil || got.MemoryErr != nil {
					t.Fatalf("%s: errors %v, %v", label, got.CPUErr, got.MemoryErr)
				}
				if d := cmp.Diff(w.cpu, got.CPU); d != "" {
					t.Errorf("%s: cpu (-want +got):\n%s", label, d)
				}
				if got.CPUWeight != w.weight {
					t.Errorf("%s: weight %d, want %d", label, got.CPUWeight, w.weight)
				}
				if d := cmp.Diff(w.memory, got.Memory); d != "" {
					t.Errorf("%s: memory (-want +got):\n%s", label, d)
				}
			}
			for _, p := range []struct {
				label string
				w     want
			}{{"guaranteed", tt.guaranteed}, {"burstable", tt.burstable}} {
				pod := gPod
				if p.label == "burstable" {
					pod = bPod
				}
				if _, err := pm.EnsurePod(pod); err != nil {
					t.Fatalf("EnsurePod: %v", err)
				}
				check(p.label, pm.PodStatusConfig(pod), p.w)
			}

			// Neither usage nor other limits are read.
			name := pm.CgroupName(gPod)
			for _, f := range []string{"memory.current", "memory.stat", "memory.usage_in_bytes", "memory.min", "pids.max", "cpu.stat", "cgroup.controllers"} {
				for _, d := range []string{tt.cpuDir, tt.memDir} {
					_ = os.Remove(filepath.Join(root, d, name, f))
				}
			}
			check("without the other files", pm.PodStatusConfig(gPod), tt.guaranteed)

			// A memory limit that cannot be read leaves the cpu read.
			if err := os.Remove(filepath.Join(root, tt.memDir, name, tt.memory)); err != nil {
				t.Fatal(err)
			}
			got := pm.PodStatusConfig(gPod)
			if got.MemoryErr == nil || got.Memory != nil {
				t.Errorf("memory limit file gone: memory %v, error %v; want an error", got.Memory, got.MemoryErr)
			}
			if got.CPUErr != nil || cmp.Diff(tt.guaranteed.cpu, got.CPU) != "" {
				t.Errorf("memory limit file gone: cpu %v, %v; want %v", got.CPU, got.CPUErr, tt.guaranteed.cpu)
			}
			// A cpu file that cannot be read leaves the memory read.
			if err := os.Remove(filepath.Join(root, tt.cpuDir, name, tt.cpuFile)); err != nil {
				t.Fatal(err)
			}
			if got := pm.PodStatusConfig(bPod); got.CPUErr != nil || got.MemoryErr != nil {
				t.Errorf("another pod: errors %v, %v", got.CPUErr, got.MemoryErr)
			}
			got = pm.PodStatusConfig(gPod)
			if got.CPUErr == nil || got.CPU != nil {
				t.Errorf("%s gone: cpu %v, error %v; want an error", tt.cpuFile, got.CPU, got.CPUErr)
			}

			gone := podOf("gone1", ctr("a", nil, nil))
			if got := pm.PodStatusConfig(gone); !errors.Is(got.CPUErr, os.ErrNotExist) || !errors.Is(got.MemoryErr, os.ErrNotExist) {
				t.Errorf("pod without a cgroup: errors %v, %v; want not exist", got.CPUErr, got.MemoryErr)
			}
		})
	}
}

// TestPodStatusConfigDisabled: disabled pod cgroups give ErrNotFound.
func TestPodStatusConfigDisabled(t *testing.T) {
	pm := newPM(t, cgroup.PodManagerOptions{Disabled: true})
	got := pm.PodStatusConfig(gPod)
	if !errors.Is(got.CPUErr, cgroup.ErrNotFound) || !errors.Is(got.MemoryErr, cgroup.ErrNotFound) {
		t.Errorf("errors %v, %v; want ErrNotFound", got.CPUErr, got.MemoryErr)
	}
}
