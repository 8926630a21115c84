package cgroup

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ResourceConfig holds the limits of one cgroup. A nil field is left as
// the system sets it.
type ResourceConfig struct {
	// CPUShares (cgroup v1 cpu.shares; converted to cpu.weight on v2).
	CPUShares *uint64
	// CPUQuota in microseconds per CPUPeriod; -1 for no limit.
	CPUQuota *int64
	// CPUPeriod in microseconds.
	CPUPeriod *uint64
	// Memory limit in bytes.
	Memory *int64
	// PidsLimit is the maximum number of processes.
	PidsLimit *int64
}

// PodManager creates and removes the cgroups of pods. The agent calls it
// before it starts a pod's sandbox and after the pod terminated.
type PodManager interface {
	// EnsurePod creates or updates the pod's cgroup and returns the name
	// to pass to the runtime as the sandbox's cgroup parent.
	EnsurePod(pod *v1.Pod) (cgroupParent string, err error)
	// DestroyPod removes the pod's cgroup once its processes are gone.
	DestroyPod(uid types.UID) error
	// Pods lists the UIDs of the pod cgroups that exist (for the removal of
	// orphans by housekeeping).
	Pods() ([]types.UID, error)
}
