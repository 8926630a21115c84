// Package stats computes the node's resource summary, the kubelet's
// /stats/summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1), from which
// metrics.ResourceCollector makes the resource metrics metrics-server
// scrapes from /metrics/resource. The package does not import Prometheus:
// an agent that serves no node API links none of it.
//
// # Usage
//
//	p, err := stats.New(stats.Options{NodeName: "node-1", Runtime: stats.CRIClient(criClient.RuntimeClient())})
//	summary, err := p.Summary(ctx, false) // nodeapi.StatsProvider
//	registry.MustRegister(&metrics.ResourceCollector{Context: ctx, Provider: p})
//
// The pods' and containers' figures come from the runtime: CRI
// ListPodSandboxStats where the runtime serves it (containerd 1.7 and
// later), else ListContainerStats, the pod's CPU and memory then being
// the sums of its containers'. A container the runtime has no figures
// for (a runtime without ListContainerStats) gets its CPU and memory from
// its cgroup (Options.Cgroups, ContainerCgroup). With
// Options.ContainerLogDir and PodVolumes, each container's logs and the
// pod's ephemeral volumes (emptyDirs on disk) are measured as du does,
// within one file system, hard links once, at most MaxDiskUsageEntries
// entries a tree, each size reused for DiskUsagePeriod (10s); the pod's
// ephemeral storage is its containers' writable layers and logs plus
// those volumes, the kubelet's calcEphemeralStorage. The node's figures
// come from /proc (CPU time, process limit and count), the root memory
// cgroup (usage and working set, as the kubelet reads them) and the file
// system holding RootDir. A container in its restart back-off is listed
// with its pod (its newest instance, without CPU or memory), as the
// kubelet lists it.
// Other consumers (the eviction manager) read the same Summary.
//
// # Concurrency
//
// A Provider is safe for concurrent use. It keeps the previous node CPU
// sample to compute the node's usageNanoCores.
//
// # Differences from the kubelet
//
// The kubelet reads most figures from cAdvisor; nodekit has none. Hence:
// system containers only as Options.SystemContainers names them (the
// agent names its own cgroup "kubelet" and its pods' "pods"), no accelerator or
// user-defined metrics, no PSI, and volume stats only for the volumes
// PodVolumes names; the /etc/hosts file is not counted in the ephemeral
// storage. Containers a runtime reports no stats for appear
// without figures.
package stats
