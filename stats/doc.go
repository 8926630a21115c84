// Package stats computes the node's resource summary, the kubelet's
// /stats/summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1), and the
// resource metrics metrics-server scrapes from /metrics/resource.
//
// # Usage
//
//	p, err := stats.New(stats.Options{NodeName: "node-1", Runtime: stats.CRIClient(criClient.RuntimeClient())})
//	summary, err := p.Summary(ctx, false) // nodeapi.StatsProvider
//	registry.MustRegister(&stats.ResourceCollector{Context: ctx, Provider: p})
//
// The pods' and containers' figures come from the runtime: CRI
// ListPodSandboxStats where the runtime serves it (containerd 1.7 and
// later), else ListContainerStats, the pod's CPU and memory then being
// the sums of its containers'. The node's come from /proc (CPU time,
// memory) and the file system holding RootDir. Other consumers (eviction,
// image garbage collection) read the same Summary.
//
// # Concurrency
//
// A Provider is safe for concurrent use. It keeps the previous node CPU
// sample to compute the node's usageNanoCores.
//
// # Differences from the kubelet
//
// The kubelet reads most figures from cAdvisor; nodekit has none. Hence:
// no system containers (kubelet, runtime, pods), no per-container logs
// file-system figures, no accelerator or user-defined metrics, no PSI, and
// no volume stats yet. Containers a runtime reports no stats for appear
// without figures. The node's working set is total memory less available
// memory (/proc/meminfo), not the root cgroup's usage less inactive file
// pages.
package stats
