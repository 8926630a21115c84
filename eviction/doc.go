// Package eviction is the kubelet's node-pressure eviction manager: it
// watches the node's signals, reports the MemoryPressure, DiskPressure and
// PIDPressure conditions, frees node-level resources and, when that is not
// enough, evicts pods the way the kubelet ranks them.
//
// # Signals and thresholds
//
// The signals are the kubelet's: memory.available (the memory capacity
// less the root cgroup's working set: usage less inactive file pages),
// nodefs.available and nodefs.inodesFree (the file system of the agent's
// root directory), imagefs.available and imagefs.inodesFree (the
// runtime's image file system; the node's when the runtime does not tell
// it apart) and pid.available. A Threshold is a signal below a quantity or
// a percentage of its capacity; a hard one acts at once, a soft one once
// met for its GracePeriod; MinReclaim keeps a threshold met until the
// signal is back above it by that much. ParseThresholds reads the
// kubelet's configuration maps; DefaultHard is the kubelet's default
// (memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%). HardReservation is what the hard thresholds of
// memory and nodefs hold back: the node's allocatable resources leave it
// out, as the kubelet's do.
//
// # Synchronization
//
// Every MonitoringInterval (10 s) the manager reads the stats and takes
// one Step, a pure function of the time, the thresholds, the observations
// and the previous State: the thresholds met now or still short of their
// minimum reclaim; among those, the ones met for their grace period; the
// pressure conditions, which last PressureTransitionPeriod (5 min) after
// their signal was last under pressure. When a threshold acts (memory
// first), a disk signal first runs the node-level reclaim (dead containers
// and sandboxes of terminated pods, then unused images) and reads the
// stats again; if a threshold is still met, Rank orders the active pods
// (memory and disk: usage above request first, then lower priority, then
// usage above request; pid: priority, then process count), and the first
// pod that is not critical (static, mirror, or of system-critical
// priority) is evicted: with a grace period of 1 s for a hard threshold,
// min(MaxPodGracePeriodSeconds, the pod's) for a soft one, status phase
// Failed, reason Evicted, the kubelet's message ("The node was low on
// resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container
// c was using 300Mi, request is 100Mi, has larger consumption of memory. "),
// a DisruptionTarget condition (TerminationByKubelet), and a Warning
// Evicted event. One pod per synchronization; the next one waits (at most
// 30 s) until it terminated.
//
// With Options.MemoryCgroup (cgroup v1), the manager also arms the
// kernel's memory threshold notifications (cgroup.event_control on
// memory.usage_in_bytes) at the usage where each memory.available
// threshold is crossed (capacity less the threshold plus the inactive file
// pages, as the kubelet computes it), re-armed when that value changes,
// and synchronizes as soon as one fires rather than at the next interval.
//
// Before the thresholds, each synchronization evicts every pod over one of
// its local storage limits, as the kubelet's localStorageEviction
// (LocalStorageViolation): an emptyDir using more than its sizeLimit
// ("Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\"."),
// the pod's ephemeral storage above its ephemeral-storage limit ("Pod
// ephemeral local storage usage exceeds the total limit of containers
// 2Mi. "), a container's logs and writable layer above its own ("Container
// c exceeded its local ephemeral storage limit \"1Mi\". "); at once, with
// no DisruptionTarget condition, as the kubelet.
//
// Admit is the kubelet's admission check: under memory pressure only
// BestEffort pods are refused (unless they tolerate the memory-pressure
// taint); under other pressure every pod but the critical ones.
//
// # Stats
//
// The stats come through StatsProvider, a one-method interface.
// CgroupStats is one that reads cgroupfs (v1 and v2), statfs and /proc
// for the node's signals and the pods' memory and processes, and takes
// the containers' figures, volumes and ephemeral storage from a summary
// (the stats package's Provider, the node API's /stats/summary:
// PodStatsFromSummary) or, without one, measures the emptyDirs and logs.
// With MemoryCapacity and MemoryCgroup it measures memory.available over
// a budget: the capacity less one cgroup's working set (the pods' root
// cgroup), for an agent sharing its host.
//
// # Differences from the kubelet
//
//   - No allocatable memory signal (and so no notifier on the pods'
//     cgroup). Threshold notifications need cgroup v1, as the kubelet's;
//     on v2 pressure is polled.
//   - CgroupStats does not find out whether the image file system is
//     apart from the node's (DedicatedImageFs is the caller's): the
//     agent counts the writable layers against the containers' limits, as
//     the kubelet does when they share one file system.
//   - Local storage usage is measured at each synchronization (sizes
//     reused for the summary's DiskUsagePeriod, 10s) where the kubelet's
//     volume stats are refreshed every minute: a pod over its limit is
//     evicted sooner.
//   - The node conditions' taints are left to the cluster's node lifecycle
//     controller, as for the kubelet; PressureTaints names them.
//   - A pressure condition with a PressureTransitionPeriod shorter than
//     the monitoring interval still shows while its threshold is met (the
//     kubelet would never show it).
//
// # Concurrency
//
// A Manager is safe for concurrent use; synchronizations never overlap.
// Run returns after its loop ended.
//
// # Errors
//
// Stats that cannot be read make Synchronize return an error and change
// nothing: no condition, no eviction. A signal the stats leave out is not
// observed and none of its thresholds is ever met. Errors of the
// node-level reclaim are logged and the eviction goes on.
package eviction
