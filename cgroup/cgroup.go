package cgroup

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Sentinel error classes; match them with errors.Is.
var (
	// ErrNotFound: the cgroup does not exist.
	ErrNotFound = errors.New("cgroup: not found")
	// ErrNotSupported: the host lacks what was asked for (a controller not
	// mounted under cgroup v1 or not enabled under cgroup v2, no cgroup
	// filesystem at all).
	ErrNotSupported = errors.New("cgroup: not supported")
)

// ResourceConfig holds the limits of one cgroup. A nil field is left as it
// is: Create leaves the kernel's default, Update leaves the current value.
// The zero value sets nothing.
type ResourceConfig struct {
	// CPUShares is the relative CPU weight: cgroup v1 cpu.shares, written
	// on cgroup v2 as cpu.weight = CPUSharesToWeight(CPUShares). Between
	// MinShares and MaxShares.
	CPUShares *uint64
	// CPUQuota is the CPU time in microseconds the cgroup may use in each
	// CPUPeriod (cgroup v1 cpu.cfs_quota_us, the first field of cgroup v2
	// cpu.max); -1 for no limit. 0 is left as it is.
	CPUQuota *int64
	// CPUPeriod is the CFS period in microseconds (cgroup v1
	// cpu.cfs_period_us, the second field of cgroup v2 cpu.max). 0 is left
	// as it is.
	CPUPeriod *uint64
	// Memory is the memory limit in bytes (cgroup v1 memory.limit_in_bytes,
	// cgroup v2 memory.max); -1 for no limit. 0 is left as it is.
	Memory *int64
	// MemoryMin is the memory protected from reclaim in bytes (cgroup v2
	// memory.min; the kubelet's MemoryQoS). Cgroup v1 has no such file and
	// ignores it.
	MemoryMin *int64
	// PidsLimit is the maximum number of tasks (pids.max); -1 for no limit.
	// 0 is left as it is.
	PidsLimit *int64
	// HugePageLimits are the hugetlb limits in bytes by page size in
	// bytes (cgroup v1 hugetlb.<size>.limit_in_bytes, cgroup v2
	// hugetlb.<size>.max); -1 for no limit. A non-nil map limits every
	// page size the cgroup offers: those it omits to 0, as the kubelet
	// does (a pod may use only the hugepages it asked for). Nil is left as
	// it is; so is everything on a host without the hugetlb controller.
	HugePageLimits map[int64]int64
}

// Stats are a few figures read from a cgroup.
type Stats struct {
	// MemoryUsage in bytes: cgroup v1 memory.usage_in_bytes, cgroup v2
	// memory.current.
	MemoryUsage uint64
	// MemoryWorkingSet in bytes: MemoryUsage less the inactive file cache
	// (total_inactive_file on v1, inactive_file on v2, from memory.stat),
	// as the kubelet reports it.
	MemoryWorkingSet uint64
	// CPUUsage is the CPU time used: cgroup v1 cpuacct.usage, cgroup v2
	// usage_usec of cpu.stat.
	CPUUsage time.Duration
}

// Manager creates, updates, reads and removes cgroups by name. A name is
// the cgroup's path in cgroupfs form below the root of every hierarchy,
// such as "/kubepods/burstable/pod<UID>"; "" and "/" name the root, which
// can be read but not created or destroyed.
//
// NewManager returns the cgroupfs implementations for cgroup v1 (and
// hybrid) and cgroup v2. They are safe for concurrent use; they hold no
// state beyond the Info they were built from.
type Manager interface {
	// Info describes the hierarchy the manager writes to.
	Info() Info
	// Create makes the cgroup (and its missing ancestors) in every
	// hierarchy, then applies res. On cgroup v1 a new cpuset cgroup takes
	// its parent's cpuset.cpus and cpuset.mems; on cgroup v2 the
	// controllers are enabled in the subtree_control of every ancestor.
	// Directories it made are removed again when it fails.
	Create(name string, res *ResourceConfig) error
	// Update applies res to an existing cgroup.
	Update(name string, res *ResourceConfig) error
	// Exists reports whether the cgroup exists in every hierarchy whose
	// controller the manager sets (v1), or exists with those controllers
	// enabled (v2).
	Exists(name string) bool
	// Destroy kills the processes left in the cgroup and its descendants,
	// waits until they are gone, and removes the cgroup and its
	// descendants from every hierarchy. A cgroup that does not exist is
	// not an error. It gives up when ctx ends.
	Destroy(ctx context.Context, name string) error
	// Pids lists the processes in the cgroup and its descendants, in every
	// hierarchy, sorted and without duplicates.
	Pids(name string) ([]int, error)
	// AddProcess moves the process pid into the cgroup in every hierarchy.
	AddProcess(name string, pid int) error
	// Children lists the names of the cgroup's direct child cgroups found
	// in any hierarchy, sorted.
	Children(name string) ([]string, error)
	// Config reads the cgroup's current limits back.
	Config(name string) (*ResourceConfig, error)
	// Stats reads the cgroup's usage.
	Stats(name string) (*Stats, error)
}

// FileError is a failed read or write of one cgroup file.
type FileError struct {
	// Op is "read", "write", "mkdir" or "rmdir".
	Op string
	// Controller whose file it is ("cgroup" for the core cgroup.* files).
	Controller string
	// Path of the file or directory.
	Path string
	// Value written, for Op "write".
	Value string
	// Err is the cause (a syscall.Errno for the kernel's answer).
	Err error
}

func (e *FileError) Error() string {
	s := "cgroup: " + e.Op
	if e.Op == "write" {
		s += " " + strconv.Quote(e.Value) + " to"
	}
	s += " " + e.Path
	if e.Controller != "" {
		s += " (" + e.Controller + " controller)"
	}
	return s + ": " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

// NotSupportedError says which controller is missing and where. It matches
// ErrNotSupported.
type NotSupportedError struct {
	Controller string
	// Where names the cgroup or the cgroupfs root it was looked for in.
	Where string
	// Reason such as "not mounted" or "not enabled".
	Reason string
}

func (e *NotSupportedError) Error() string {
	return "cgroup: " + e.Controller + " controller " + e.Reason + " in " + e.Where
}

// Is makes NotSupportedError match ErrNotSupported.
func (e *NotSupportedError) Is(target error) bool { return target == ErrNotSupported }
