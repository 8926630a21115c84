// Package gc collects what a long-running node accumulates: dead
// containers, old sandboxes, the logs of removed pods (ContainerCollector)
// and unused images (ImageCollector), as the kubelet's container and image
// garbage collectors do, with the kubelet's defaults.
//
// Each collector is a pure planner and a thin shell. PlanContainers and
// PlanImages decide, without I/O, what to remove given the runtime's
// listing, what the agent knows of its pods, the file system's usage and
// the time; ContainerCollector and ImageCollector list the runtime, call
// the planner and carry out the plan, on a period, until their context
// ends.
//
// # Containers and sandboxes
//
// Every minute (ContainerOptions.Period) the container collector removes:
//
//   - dead containers beyond MaxPerPodContainer (1) per pod and container
//     name, older than MinAge (0), oldest first; all dead containers of a
//     pod that was deleted and terminated (only once every pod source is
//     ready); over MaxContainers (no limit) an equal share per container
//     is kept, then the oldest go. A container in an unknown state is
//     stopped first. A running container is never removed.
//   - sandboxes that are not ready and hold no container: every one but
//     the newest of a pod that still exists, all of a deleted pod. A
//     sandbox is stopped before its removal, which tears down its network
//     and releases its IP. This is also what removes the sandboxes a
//     runtime crash left half-made during RunPodSandbox: the agent goes on
//     with a new sandbox, and the old one, not ready, is collected. The
//     agent calls Trigger when the runtime comes back after an outage: the
//     collector then runs every RetryPeriod (5 s) for one Period, so that
//     such sandboxes go within seconds of the pod's new sandbox instead of
//     at the next period.
//   - the log directories (<PodLogsDir>/<namespace>_<name>_<uid>) of
//     pods whose content may be removed (deleted and terminated, or
//     unknown once the sources are ready), as the kubelet's
//     evictPodLogsDirectories: every collection reads the directory, also
//     one that skips listing the runtime (Changes), so that a directory
//     goes within a Period of its pod, as on the kubelet (1 minute).
//
// Collect(ctx, true) is the eviction manager's reclaim: it also removes
// the dead containers and sandboxes of pods that terminated but were not
// deleted.
//
// # Images
//
// Every five minutes (ImageOptions.Period) the image collector lists the
// images and the containers, remembering when it first saw each image and
// when a container (running or not) last used it. When the image file
// system is at or above HighThresholdPercent (85) of its capacity, it
// removes images, least recently used first, until usage is down to
// LowThresholdPercent (80), skipping images in use, pinned (by the runtime
// or ImageOptions.Pinned) or first seen less than MinAge (2m) ago. With
// MaxAge (imageMaximumGCAge; off by default) an image unused for longer is
// removed whatever the disk usage, once the collector has run that long.
// Not enough to free is an error with the kubelet's message.
//
// The image file system's size comes from ImageOptions.FsStats, statfs of
// ImageFsPath, or the mount point the runtime names in CRI ImageFsInfo.
//
// # Differences from the kubelet
//
//   - Only runtime objects that carry a pod UID (nodekit's and the
//     kubelet's labels) are considered; anything else in the runtime is
//     not the agent's to remove.
//   - A sandbox whose only containers this collection removes goes in the
//     same collection (the kubelet waits for the next one, a minute later).
//   - With MaxAge, an image never seen in use ages from when it was first
//     seen; the kubelet counts such an image as unused since forever and
//     removes it at the first collection after MaxAge of uptime, even if
//     it was just pulled.
//   - With ContainerOptions.Changes (the agent counts the changes of the
//     runtime's pods, of its pods and of their workers), a periodic
//     collection that would find what the last one found, which removed
//     nothing, does not list the runtime: an idle node with 10,000 pods
//     does not decode 20,000 containers and sandboxes every minute. It
//     lists every Resync (10m) whatever the count, so that what changed
//     out of the agent's sight (a sandbox another client left) is
//     collected within that time rather than within a minute.
//   - A runtime that keeps a current cache of its pods (CachedLister: the
//     agent's, from its PLEG) answers a collection that lists with the
//     pods that have something dead, without a call to the runtime: the
//     first collections after a start of 10,000 pods decode no list of
//     20,000 containers and sandboxes. The runtime itself is listed every
//     Resync and for the eviction manager's reclaim.
//   - The legacy /var/log/containers symlinks are not managed (nodekit
//     does not create them).
//   - ContainerPolicy.MaxPerPodContainer 0 means the default (1); use
//     KeepNoDeadContainers to keep none.
//
// # Concurrency
//
// Both collectors are safe for concurrent use; collections of one
// collector never overlap. Run returns after its goroutine's work ended.
//
// # Errors
//
// A collection that cannot list the runtime removes nothing and reports
// it (Run retries after RetryPeriod, 5 s); a removal the runtime refuses
// is reported with the object's ID and pod and the rest of the plan goes
// on. Run logs errors and keeps going; it never stops on them.
package gc
