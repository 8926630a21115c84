// Package metrics holds the kubelet's Prometheus metrics for one nodekit
// agent, on a registry of the agent's own (never the process-wide one), so
// that two agents in one process keep separate series. The parts of
// nodekit do not import Prometheus: they take small observer hooks in
// their Options, and the methods of Kubelet and Probes are those hooks.
//
//	kubelet_pod_start_duration_seconds        ObservePodStatus (status.Options.Observer)
//	kubelet_pod_start_sli_duration_seconds    ObservePodStatus, with Images for the pull times
//	kubelet_pleg_relist_duration_seconds      ObserveRelist (pleg.GenericOptions.OnRelist)
//	kubelet_pleg_relist_interval_seconds      ObserveRelist
//	kubelet_pod_worker_duration_seconds       ObservePodSync (podworker.Options.OnSync)
//	kubelet_runtime_operations_total          Runtime, Images (wrappers of the CRI services)
//	kubelet_runtime_operations_errors_total   Runtime, Images
//	kubelet_runtime_operations_duration_seconds  Runtime, Images
//	kubelet_started_pods_total                Runtime (RunPodSandbox calls)
//	kubelet_started_containers_total          Runtime (CreateContainer calls, by container_type)
//	kubelet_evictions                         ObserveEviction (eviction.Options.OnEvict)
//	prober_probe_total, prober_probe_duration_seconds   Probes (probe.Options.Metrics), /metrics/probes
//
// kubelet_running_pods and kubelet_running_containers are read from the
// runtime at each scrape by nodeapi.RuntimeCollector; ResourceCollector
// makes the resource metrics of /metrics/resource (node, pod and
// container CPU and working set, what metrics-server reads) from a node
// summary (package stats) at each scrape. Names, labels, help
// texts and buckets are the kubelet's (v1.37).
//
// # Usage
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg)
//	rt = m.Runtime(rt)                       // before the parts use it
//	plegOpts.OnRelist = m.ObserveRelist
//	workerOpts.OnSync = m.ObservePodSync
//	statusOpts.Observer = m.ObservePodStatus
//
// Package nodeserver does this for an agent that serves the node API.
//
// # Concurrency
//
// Kubelet and Probes are safe for concurrent use; their methods never
// block on I/O.
//
// # Differences from the kubelet
//
//   - kubelet_pod_worker_duration_seconds times each call of a sync
//     function; the kubelet times from when the update was dispatched, so
//     its values include the time an update waited for the worker.
//   - A pod is first seen at its first status (the agent's first sync of
//     it), where the kubelet takes the time its config source delivered
//     it; the SLI's end is when the agent sets the status with every
//     container started, where the kubelet waits to see that status on
//     its watch, and the SLI does not subtract the time init containers
//     ran. Both are off by the time of one status round trip at most, for
//     pods without init containers.
//   - kubelet_started_pods_total and kubelet_started_containers_total
//     count the RunPodSandbox and CreateContainer calls of the runtime
//     given to Runtime, as the kubelet counts its attempts; the _errors_
//     variants are not kept.
package metrics
