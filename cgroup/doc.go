// Package cgroup is the cgroupfs manager for cgroup v1 and v2: the node's
// root cgroup, the QoS cgroups and the pod cgroups, with the limits the
// kubelet computes from pod specs.
//
// Three layers, each usable on its own:
//
//   - ResourceConfigForPod computes a pod cgroup's limits exactly as the
//     kubelet's ResourceConfigForPod does (QoS class, cpu.shares from
//     requests, CFS quota from limits, memory limit; init containers,
//     sidecars, pod-level resources and overhead counted as the kubelet
//     counts them), with the cgroup v2 conversions (CPUSharesToWeight,
//     FormatCPUMax). Pods whose resources cannot be given a cgroup are
//     rejected before, by admission.InvalidResources.
//   - Detect finds the host's mode (ModeV1, ModeHybrid, ModeUnified) from
//     the filesystem magic numbers and its controllers from
//     /proc/self/mountinfo and cgroup.controllers; NewManager (or Open)
//     returns the Manager that creates, updates, reads and destroys
//     cgroups by name in every hierarchy, moves processes and kills what
//     is left before removing a cgroup.
//   - PodManager keeps the kubelet's hierarchy: <Root> (kubepods) for
//     Guaranteed pods, <Root>/burstable and <Root>/besteffort, and a
//     pod<UID> cgroup per pod, created before the sandbox and removed after
//     the pod terminated.
//
// # Usage
//
//	pm, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Logger: log})
//	...
//	_ = pm.UpdateQoS(activePods)              // before a new pod's cgroup
//	parent, err := pm.EnsurePod(pod)          // "/kubepods/burstable/pod<UID>"
//	result := rt.SyncPodWithOptions(ctx, pod, status, podruntime.SyncPodOptions{CgroupParent: parent})
//	...
//	err = pm.DestroyPod(ctx, pod.UID)         // after the pod terminated
//	uids, err := pm.Pods()                    // housekeeping: destroy orphans (its own only, with StateDir)
//
// The name EnsurePod returns is the sandbox's cgroup parent for a runtime
// using the cgroupfs driver (containerd's runc with SystemdCgroup = false);
// the runtime makes each container's cgroup below it and sets the
// container limits there.
//
// # What is written
//
// Cgroup v1 (and hybrid): the cgroup is made in every mounted hierarchy
// (cpu, cpuacct, cpuset, memory, pids, devices, freezer, blkio, named
// hierarchies such as name=systemd) and, on a hybrid host, in the cgroup2
// hierarchy too, as runc does; a new cpuset cgroup takes its parent's
// cpuset.cpus and cpuset.mems. Limits go to cpu.shares (read back: the
// kernel clamps), cpu.cfs_period_us and cpu.cfs_quota_us,
// memory.limit_in_bytes, pids.max and hugetlb.<size>.limit_in_bytes.
// Cgroup v2: the cpu, cpuset, hugetlb, io, memory and pids controllers the
// root offers are enabled in the cgroup.subtree_control of every ancestor;
// limits go to cpu.weight, cpu.max, memory.max, memory.min, pids.max and
// hugetlb.<size>.max. Hugetlb limits, when given, cover every page size
// the cgroup offers: a size not given is limited to 0, as the kubelet
// does; a host without the hugetlb controller gets none, as with the
// kubelet.
//
// The root cgroup is limited to PodManagerOptions.Allocatable (or
// SetAllocatable): cpu.shares, memory, pids and hugepages, the kubelet's
// node allocatable enforcement. Destroy kills with
// cgroup.kill on cgroup v2 and with SIGKILL to each process otherwise,
// until none is left, then removes the cgroup and its descendants
// (children first, retrying a busy rmdir).
//
// A plain directory laid out like a cgroup root (see cgroup/cgrouptest)
// is detected as emulated: the same code then runs on regular files, with
// the kernel's side played in user space and no signal sent, for tests
// without root.
//
// # Differences from the kubelet
//
// No systemd driver (cgroupfs only), no CPU manager cpusets. The QoS
// cgroups' hugetlb limits are left at the kernel's default (no limit)
// where the kubelet writes 1<<62, the same in effect. UpdateQoS writes memory.min even when it drops to 0, which the kubelet
// skips. UpdateQoS keeps each active pod's requests and their sums between
// calls, so that admitting n pods one at a time computes n pods' requests
// rather than n²/2 (the kubelet sums every active pod's requests for each
// new pod), and writes nothing when the values are those it last wrote
// (a BestEffort pod admitted). CPUWeightToShares rounds up, so that
// weights convert back.
//
// # Concurrency
//
// Managers and PodManager are safe for concurrent use. The PodManager
// detects the hierarchy and creates the node cgroups on its first use
// (EnsureNode, or any pod method); NewPodManager does no I/O.
//
// # Errors
//
// Errors start with "cgroup: ". A failed file operation is a *FileError
// naming the operation, the file, the value written and the controller:
//
//	cgroup: write "4096" to /sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes (memory controller): device or resource busy (usage 176128 bytes is above the limit)
//
// A controller the host lacks gives a *NotSupportedError matching
// ErrNotSupported; a missing cgroup on Update matches ErrNotFound.
package cgroup
