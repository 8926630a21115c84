package cgroup

import (
	"fmt"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// PodStatusConfig is a pod cgroup's cpu and memory configuration as the
// kubelet's GetPodCgroupConfig reads it for the pod's status.resources:
// the cpu files and the memory limit file, each read on its own, nothing
// else (no usage, no pids, no hugetlb).
type PodStatusConfig struct {
	// CPU holds CPUShares, CPUQuota (-1: no limit) and CPUPeriod:
	// cpu.shares, cpu.cfs_quota_us and cpu.cfs_period_us on cgroup v1;
	// cpu.weight converted to shares as the kubelet's
	// cpuWeightToCPUShares converts it (rounded down: weight 2 is 28
	// shares) and cpu.max on cgroup v2. Nil when CPUErr is set.
	CPU *ResourceConfig
	// CPUWeight is cpu.weight as read on cgroup v2, 0 on cgroup v1.
	CPUWeight uint64
	CPUErr    error
	// Memory holds Memory: memory.limit_in_bytes (v1) or memory.max
	// (v2), -1 without a limit. Nil when MemoryErr is set.
	Memory    *ResourceConfig
	MemoryErr error
}

// statusConfigReader is a Manager that reads the cpu and memory limits
// alone (the filesystem Manager).
type statusConfigReader interface {
	statusConfig(name string) PodStatusConfig
}

// PodStatusConfig reads the pod cgroup's cpu and memory configuration
// for its status (see PodStatusConfig). A Manager other than the
// filesystem one is read with Config, once for both. A pod without a
// cgroup gives errors matching ErrNotFound.
func (p *PodManager) PodStatusConfig(pod *v1.Pod) PodStatusConfig {
	fail := func(err error) PodStatusConfig { return PodStatusConfig{CPUErr: err, MemoryErr: err} }
	if p.opts.Disabled {
		return fail(fmt.Errorf("cgroup: pod cgroups are disabled: %w", ErrNotFound))
	}
	if err := checkUID(pod.UID); err != nil {
		return fail(err)
	}
	mgr, err := p.manager()
	if err != nil {
		return fail(err)
	}
	name := p.CgroupName(pod)
	if r, ok := mgr.(statusConfigReader); ok {
		return r.statusConfig(name)
	}
	rc, err := mgr.Config(name)
	if err != nil {
		return fail(err)
	}
	return PodStatusConfig{
		CPU:    &ResourceConfig{CPUShares: rc.CPUShares, CPUQuota: rc.CPUQuota, CPUPeriod: rc.CPUPeriod},
		Memory: &ResourceConfig{Memory: rc.Memory},
	}
}

func (m *fsManager) statusConfig(name string) PodStatusConfig {
	rel, err := relName(name)
	if err != nil {
		return PodStatusConfig{CPUErr: err, MemoryErr: err}
	}
	var out PodStatusConfig
	if m.v2 {
		dir := filepath.Join(m.info.Unified, rel)
		out.CPU, out.CPUWeight, out.CPUErr = m.statusCPUV2(dir)
		out.Memory, out.MemoryErr = m.statusMemory(dir, "memory.max")
		return out
	}
	if dir, err := m.controllerDir("cpu", rel); err != nil {
		out.CPUErr = err
	} else {
		out.CPU, out.CPUErr = m.statusCPUV1(dir)
	}
	if dir, err := m.controllerDir("memory", rel); err != nil {
		out.MemoryErr = err
	} else {
		out.Memory, out.MemoryErr = m.statusMemory(dir, "memory.limit_in_bytes")
	}
	return out
}

func (m *fsManager) statusCPUV2(dir string) (*ResourceConfig, uint64, error) {
	s, err := m.read("cpu", dir, "cpu.max")
	if err != nil {
		return nil, 0, err
	}
	quota, period, err := ParseCPUMax(s)
	if err != nil {
		return nil, 0, &FileError{Op: "read", Controller: "cpu", Path: filepath.Join(dir, "cpu.max"), Err: err}
	}
	if period == 0 {
		return nil, 0, &FileError{Op: "read", Controller: "cpu", Path: filepath.Join(dir, "cpu.max"), Err: fmt.Errorf("cgroup: cpu.max %q: no period", s)}
	}
	w, err := m.readUint("cpu", dir, "cpu.weight")
	if err != nil {
		return nil, 0, err
	}
	shares := kubeletWeightToShares(w)
	return &ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period}, w, nil
}

func (m *fsManager) statusCPUV1(dir string) (*ResourceConfig, error) {
	s, err := m.read("cpu", dir, "cpu.cfs_quota_us")
	if err != nil {
		return nil, err
	}
	quota, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, &FileError{Op: "read", Controller: "cpu", Path: filepath.Join(dir, "cpu.cfs_quota_us"), Err: err}
	}
	period, err := m.readUint("cpu", dir, "cpu.cfs_period_us")
	if err != nil {
		return nil, err
	}
	shares, err := m.readUint("cpu", dir, "cpu.shares")
	if err != nil {
		return nil, err
	}
	return &ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period}, nil
}

// statusMemory reads a memory limit file: "max" (v2) or a value above
// 2^62 (v1's unlimited) is -1.
func (m *fsManager) statusMemory(dir, file string) (*ResourceConfig, error) {
	s, err := m.read("memory", dir, file)
	if err != nil {
		return nil, err
	}
	l := int64(-1)
	if s != "max" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, &FileError{Op: "read", Controller: "memory", Path: filepath.Join(dir, file), Err: err}
		}
		if v < v1UnlimitedAbove {
			l = int64(v)
		}
	}
	return &ResourceConfig{Memory: &l}, nil
}

// SharesAfterV2RoundTrip is shares written as a cgroup v2 cpu.weight and
// read back as the kubelet's status reads it (rounded down): the kubelet's
// lossy v2 round trip, which its status compares with the shares it reads.
func SharesAfterV2RoundTrip(shares uint64) uint64 {
	return kubeletWeightToShares(CPUSharesToWeight(shares))
}

// kubeletWeightToShares is the kubelet's cpuWeightToCPUShares: cpu.weight
// as shares, rounded down, which its status compares with its lossy v2
// round trip (CPUWeightToShares rounds up instead, so that the shares
// give the weight back).
func kubeletWeightToShares(w uint64) uint64 {
	if w < 1 {
		w = 1
	}
	return (w-1)*(MaxShares-MinShares)/(MaxWeight-1) + MinShares
}
