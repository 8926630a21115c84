// Package nodeapi is the node's HTTP API, the kubelet's port 10250: the
// endpoint the API server calls for kubectl logs, exec, attach and
// port-forward, and that metrics-server and Prometheus scrape. Handler
// serves the kubelet's paths and query parameters from small interfaces,
// so that a custom agent serves the same API over its own parts; Server
// runs it over TLS.
//
//	/healthz, /healthz/{ping,log,syncloop,pleg,...}   Options.Health
//	/pods, /runningpods/                              Options.Pods, Options.Runtime
//	/containerLogs/{ns}/{pod}/{container}             Options.Logs (package logs)
//	/exec, /attach, /portForward                      Options.Streamer
//	/run                                              Options.Exec
//	/stats/summary                                    Options.Stats
//	/metrics, /metrics/resource, /metrics/probes      Options.Metrics, ResourceMetrics, ProbeMetrics
//
// A path whose part is not given answers 404.
//
// # Usage
//
//	auth, err := nodeapi.NewDelegatingAuth(client, nodeapi.AuthOptions{ClientCAFile: "/etc/kubernetes/pki/ca.crt"})
//	h, err := nodeapi.New(nodeapi.Options{
//		NodeName: "node-1",
//		Pods:     agent,                              // Pods() []*v1.Pod
//		Logs:     &logs.Provider{Runtime: criClient},
//		Runtime:  criClient,
//		Streamer: nodeapi.CRIStreamer(criClient.RuntimeClient()),
//		Metrics:  registry,                           // the agent's own
//		Auth:     auth,
//	})
//	srv, err := nodeapi.NewServer(h, nodeapi.ServerOptions{CertDir: "/var/lib/nodekit/pki"})
//	err = srv.Run(ctx)
//
// Package nodeserver does this for a nodekit.Agent (Options.NodeServer).
//
// # Security
//
// Auth is the kubelet's: a client certificate verified against the client
// CA (the API server's --kubelet-client-certificate), or a bearer token
// checked with a TokenReview; anonymous requests are refused (401) unless
// AuthOptions.Anonymous. Each request is then authorized with
// SubjectAccessReviews on resource nodes, named after the node, with the
// kubelet's verb (from the method) and subresource (from the path: stats,
// metrics, log, proxy; pods, healthz, configz first where the kubelet's
// fine-grained authorization tries them; see RequestAttributes), 403
// otherwise. Review results are cached as the kubelet's: tokens 2 minutes,
// allowed 5 minutes, denied 30 seconds. The server serves TLS only, with
// the given certificate, a self-signed one (kept in CertDir, as the
// kubelet's), or one the cluster signs and that rotates
// (ServingCertificate, a CertificateSigningRequest of signer
// kubernetes.io/kubelet-serving, kept and renewed as the kubelet's
// certificate manager does, picked at each handshake), unless
// ServerOptions.Insecure.
//
// # Streaming
//
// Exec, attach and port-forward are proxied, upgraded connection and all,
// to the URL the runtime hands out (CRI Exec, Attach, PortForward) with
// the upgrade-aware proxy of k8s.io/apimachinery/pkg/util/proxy, as the
// kubelet does; containerd and CRI-O serve those URLs themselves
// (CRIStreamer). A runtime without a streaming server gets
// StreamingServer, the CRI streaming server of k8s.io/cri-streaming on a
// loopback port, over a StreamingRuntime (ExecOnlyRuntime adapts a
// runtime that can only ExecSync). The node speaks SPDY, as the kubelet:
// kubectl 1.37's WebSocket protocols end at the API server, which
// translates them.
//
// # Concurrency
//
// A Handler is safe for concurrent use and starts no goroutine; a Server
// and a StreamingServer run until their Run's context ends, then close
// their streams and return once every handler has returned.
//
// # Errors
//
// Status codes and messages are the kubelet's: 404 for a pod or container
// that does not exist ("pod does not exist", `container "x" not found in
// pod "y"`), 400 for a query that does not decode and for log errors, 422
// for invalid log options, 500 for runtime failures (429 when the runtime
// refuses more streams). A path with "." or ".." segments is 404.
//
// # Differences from the kubelet
//
//   - No /metrics/cadvisor, /logs (node log query), /checkpoint,
//     /debug/pprof or /stats/{container}: nodekit has no cAdvisor and no
//     node log files of its own; those paths answer 404 (after
//     authorization, as the kubelet's do). /configz is served when the
//     agent has a configuration to show (Options.Configz: a
//     KubeletConfiguration, package kubeletconfig); /spec serves the
//     fields of cAdvisor's MachineInfo nodekit reads.
//   - The delegating authentication and authorization are written here on
//     kubeclient's TokenReview and SubjectAccessReview clients rather than
//     taken from k8s.io/apiserver's delegating authenticator and
//     authorizer. Measured in this module: those import
//     k8s.io/component-base's featuregate and legacyregistry (process-wide
//     state, which TestDeps forbids) and OpenTelemetry, and grow `go list
//     -m all` from 126 to 170 modules, the packages compiled by 214 (758 to
//     972) and a stripped binary by 9.9 MB (58.6 to 68.5 MB); the code
//     here is about 300 lines.
//   - No read-only port (10255): deprecated in the kubelet, off by default.
//   - ServingCertificate requests, keeps and renews the certificate as
//     the kubelet's certificate manager and file store (of client-go's
//     util/certificate) do, in code of its own over a three-method
//     CSRClient (Create, Get, Watch) rather than through that manager:
//     the manager takes a whole clientset, which links client-go's
//     scheme of every API group, and its Start loop cannot be waited for,
//     while Run must return only once its goroutines ended. On purpose
//     it also differs in this: a kept pair that does not load is logged
//     and replaced rather than failing the start; each pair is written
//     to a temporary file and renamed; an issued certificate that lacks
//     a name of the request, or is due for rotation at once, is served
//     but asked again only after the back-off, not in a loop; there is no
//     fallback to the certificates/v1beta1 API (gone since Kubernetes
//     1.22). The certificate's names are fixed when the
//     ServingCertificate is made; the kubelet's follow the Node's
//     addresses as they change.
package nodeapi
