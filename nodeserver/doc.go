// Package nodeserver serves an agent's node API, the kubelet's port
// 10250: it assembles package nodeapi's handler and TLS server, package
// metrics' kubelet metrics and the node's stats over the parts of a
// nodekit.Agent, as a hook.Server. The API server calls it for
// kubectl logs, exec, attach and port-forward; metrics-server and
// Prometheus scrape /metrics/resource, /metrics and /metrics/probes.
//
// # Usage
//
//	srv, err := nodeserver.New(nodeserver.Options{}) // port 10250, self-signed
//	agent, err := nodekit.New(nodekit.Options{
//		KubeClient: client,
//		Runtime:    criClient,
//		NodeServer: srv,
//	})
//	err = agent.Run(ctx) // serves the node API with the agent's other parts
//
// The agent serves the API only with a KubeClient: it authenticates
// callers by client certificate (Options.ClientCAFile, by default the
// client CA the API server publishes) and by bearer token (TokenReview),
// and authorizes them with SubjectAccessReviews, as the kubelet does; see
// package nodeapi. The Node advertises Options.Port in its
// status.daemonEndpoints.
//
// # Metrics
//
// Setup registers the kubelet's metrics of package metrics on
// Options.Registry (by default a registry of the server's own, never the
// process-wide one) and hands the agent the hooks that feed them: its
// runtime and image services wrapped to count the runtime operations, the
// PLEG's relists, the pod workers' syncs, the pod statuses (pod start
// durations), the evictions and the probe runs (/metrics/probes). Run
// adds kubelet_running_pods, kubelet_running_containers and the Go
// runtime's collector, and serves the resource metrics
// (metrics.ResourceCollector) over the node's summary.
//
// # Concurrency
//
// A Server serves one agent: the agent calls Setup and Attach from
// nodekit.New and Run from Agent.Run, each once; other code calls none of
// them. Run returns once its goroutines (the TLS server, the streaming
// server, the certificate rotation) have exited.
//
// # Errors
//
// New rejects contradictory options (ServerTLSBootstrap with CertFile, a
// CertFile without its KeyFile, a port out of range). Setup fails when
// the registry already holds the kubelet's metrics (two agents on one
// registry); nodekit.New then fails with that error. Run fails when the
// port cannot be listened on or the serving certificate cannot be made;
// the agent stops with that error.
//
// # Differences from the kubelet
//
// Unlike the kubelet, which always serves its API, an agent serves it
// only when given a NodeServer: an embedded agent (a test, or hollow
// nodes in one process) must not take port 10250 unasked, and a program
// that serves no node API links none of its code (the HTTP server,
// k8s.io/cri-streaming, SPDY, WebSocket, Prometheus), which saves 2.7
// MiB of an idle agent's resident memory (BenchmarkMemory's base-rss-MiB,
// 29.9 to 27.2 MiB). examples/minimal-agent serves it when it joins a
// cluster.
package nodeserver
