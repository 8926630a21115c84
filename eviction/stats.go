package eviction

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Stats is what the manager needs to know of the node and its pods. A nil
// part is unknown: its signals are not observed, and no threshold of
// them is met.
type Stats struct {
	Time    time.Time
	Memory  *MemoryStats
	NodeFs  *FsStats
	ImageFs *FsStats // nil: on the node's file system
	PIDs    *PIDStats
	Pods    map[types.UID]PodStats
}

// MemoryStats are the node's memory, in bytes. Available is Capacity less
// the root cgroup's working set (usage less inactive file pages), as the
// kubelet computes memory.available.
type MemoryStats struct {
	Available, Capacity uint64
	WorkingSet          uint64
	// InactiveFile is the usage less the working set (for the memory
	// threshold notifier). Defaults to 0.
	InactiveFile uint64
}

// FsStats are a file system's bytes and inodes.
type FsStats struct {
	AvailableBytes, CapacityBytes uint64
	InodesFree, Inodes            uint64
}

// PIDStats are the process IDs left and the limit.
type PIDStats struct {
	Available, Capacity uint64
}

// PodStats are one pod's usage. A nil field is unknown.
type PodStats struct {
	// MemoryWorkingSet of the pod's cgroup, in bytes.
	MemoryWorkingSet *uint64
	// EphemeralStorage used by the pod (its logs, emptyDirs and, when the
	// provider measures them, the writable layers), in bytes.
	EphemeralStorage *uint64
	// Volumes are the bytes used by the pod's emptyDir volumes, by volume
	// name, for their sizeLimit. A volume left out is unknown.
	Volumes map[string]uint64
	// Inodes used by the pod's ephemeral storage.
	Inodes *uint64
	// Processes in the pod's cgroup.
	Processes *uint64
	// Containers, by name, for the eviction message.
	Containers map[string]ContainerStats
}

// ContainerStats are one container's usage; nil is unknown.
type ContainerStats struct {
	MemoryWorkingSet *uint64
	// EphemeralStorage is what counts against the container's
	// ephemeral-storage limit, as the kubelet counts it: its logs, and its
	// writable layer unless the image file system is apart from the
	// node's (the layer then uses none of the node's file system).
	EphemeralStorage *uint64
}

// StatsProvider reads the stats. The node API's summary provider can
// implement it; CgroupStats reads them from cgroupfs and statfs.
type StatsProvider interface {
	Stats(ctx context.Context) (*Stats, error)
}

// StatsFunc adapts a function to a StatsProvider.
type StatsFunc func(ctx context.Context) (*Stats, error)

// Stats calls f.
func (f StatsFunc) Stats(ctx context.Context) (*Stats, error) { return f(ctx) }

var _ StatsProvider = StatsFunc(nil)
