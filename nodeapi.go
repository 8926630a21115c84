package nodekit

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/metrics"
	"github.com/nodekit/nodekit/nodeapi"
	"github.com/nodekit/nodekit/nodeapi/logs"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// NodeAPIOptions configure the node's HTTP API (package nodeapi): the
// kubelet's port 10250, which the API server calls for kubectl logs,
// exec, attach, port-forward, and for metrics and stats. An agent with a
// KubeClient serves it when Enabled; it authenticates callers by client
// certificate (ClientCAFile) and by bearer token, and authorizes them with
// SubjectAccessReviews, as the kubelet does. A standalone agent does not
// serve it (nothing could authorize a request).
//
// Unlike the kubelet, which always serves it, the API is off by default:
// an embedded agent (a test, or hollow nodes in one process) must not take
// port 10250 unasked. examples/minimal-agent turns it on.
type NodeAPIOptions struct {
	// Enabled serves the API (with a KubeClient). Defaults to false.
	Enabled bool
	// Address to listen on. Defaults to all addresses.
	Address string
	// Port defaults to 10250; it is advertised in the Node's
	// status.daemonEndpoints.
	Port int
	// Listener replaces Address and Port (tests); Port is still what the
	// Node advertises.
	Listener net.Listener
	// CertFile and KeyFile are the serving certificate. Defaults to a
	// self-signed one for the node's name and InternalIP, kept in CertDir,
	// or with ServerTLSBootstrap to one the cluster signs.
	CertFile, KeyFile string
	// ServerTLSBootstrap requests the serving certificate from the
	// cluster, as the kubelet's serverTLSBootstrap
	// (--rotate-server-certificates): a CertificateSigningRequest of
	// signer kubernetes.io/kubelet-serving for system:node:<name> with
	// the node's name and InternalIP, kept in CertDir and renewed at 70
	// to 90 % of its lifetime (nodeapi.ServingCertificate). Kubernetes
	// does not approve these requests by itself: without an approver the
	// API serves no certificate (TLS handshakes fail) until one is
	// approved. Not with CertFile. Defaults to false.
	ServerTLSBootstrap bool
	// CertDir defaults to RootDir/pki, as the kubelet's.
	CertDir string
	// ClientCAFile verifies client certificates (the API server's
	// --kubelet-client-certificate is signed by it). Defaults to the
	// client CA the API server publishes (ConfigMap
	// kube-system/extension-apiserver-authentication, key client-ca-file,
	// read when Run starts), which signs that certificate in clusters made
	// by kubeadm; the kubelet has no such default. When it cannot be read,
	// only bearer tokens authenticate, and the agent logs why.
	ClientCAFile string
	// Anonymous lets requests without credentials in as
	// system:anonymous, still subject to authorization. Defaults to false.
	Anonymous bool
	// Streamer hands out exec, attach and port-forward URLs. Defaults to
	// the runtime's own CRI streaming server when Runtime has a CRI
	// client (RuntimeClient, as runtime/cri's), otherwise to a
	// nodeapi.StreamingServer over the Runtime when it is a
	// nodeapi.StreamingRuntime, or over its ExecSync (exec only).
	Streamer nodeapi.Streamer
	// Stats serves /stats/summary and /metrics/resource. Defaults to a
	// stats.Provider over the runtime's CRI client when Runtime has one
	// (RuntimeClient), else none (404).
	Stats stats.Summarizer
	// Registry is the agent's own Prometheus registry, served at
	// /metrics; the agent adds its collectors to it: the kubelet's
	// metrics of package metrics, kubelet_running_pods and
	// kubelet_running_containers, and the Go runtime's. Defaults to a new
	// one (never the process-wide registry); two agents must not share
	// one.
	Registry *prometheus.Registry
}

// agentMetrics are the agent's kubelet metrics (package metrics), made
// when the node API is served: the hooks of the parts report to them.
// Its methods are nil-safe: a nil *agentMetrics leaves the parts without
// hooks.
type agentMetrics struct {
	kubelet *metrics.Kubelet
	probes  *prometheus.Registry // /metrics/probes
}

// newAgentMetrics registers the kubelet's metrics on the node API's
// registry and sets the hooks found in Options (probes, pod statuses,
// evictions); the others are set by New through the methods below.
func newAgentMetrics(o *Options) (*agentMetrics, error) {
	if o.nodeAPIPort() == 0 {
		return nil, nil
	}
	if o.NodeAPI.Registry == nil {
		o.NodeAPI.Registry = prometheus.NewRegistry()
	}
	k, err := metrics.New(o.NodeAPI.Registry)
	if err != nil {
		return nil, fmt.Errorf("nodekit: NodeAPI.Registry: %w", err)
	}
	m := &agentMetrics{kubelet: k, probes: prometheus.NewRegistry()}
	if o.Probes.Metrics == nil {
		p, err := metrics.NewProbes(m.probes)
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		o.Probes.Metrics = p
	}
	if o.Probes.Runtime == nil && o.Probes.Prober == nil {
		o.Probes.Runtime = k.Runtime(o.Runtime)
	}
	if prev := o.OnPodStatus; prev != nil {
		o.OnPodStatus = func(pod *v1.Pod, st v1.PodStatus) {
			k.ObservePodStatus(pod, st)
			prev(pod, st)
		}
	} else {
		o.OnPodStatus = k.ObservePodStatus
	}
	if prev := o.NodeResources.Eviction.Manager.OnEvict; prev != nil {
		o.NodeResources.Eviction.Manager.OnEvict = func(signal string) {
			k.ObserveEviction(signal)
			prev(signal)
		}
	} else {
		o.NodeResources.Eviction.Manager.OnEvict = k.ObserveEviction
	}
	return m, nil
}

// runtime returns rs counted in the runtime operation metrics.
func (m *agentMetrics) runtime(rs runtime.RuntimeService) runtime.RuntimeService {
	if m == nil {
		return rs
	}
	return m.kubelet.Runtime(rs)
}

// images returns is counted in the runtime operation metrics.
func (m *agentMetrics) images(is runtime.ImageService) runtime.ImageService {
	if m == nil {
		return is
	}
	return m.kubelet.Images(is)
}

// onRelist is the PLEG's hook.
func (m *agentMetrics) onRelist() func(d, interval time.Duration) {
	if m == nil {
		return nil
	}
	return m.kubelet.ObserveRelist
}

// onSync is the pod workers' hook.
func (m *agentMetrics) onSync() func(op string, d time.Duration) {
	if m == nil {
		return nil
	}
	return m.kubelet.ObservePodSync
}

// runtimeClienter is the optional capability of a RuntimeService that
// gives its CRI gRPC client (runtime/cri.Client).
type runtimeClienter interface {
	RuntimeClient() runtimeapi.RuntimeServiceClient
}

// nodeAPIPort returns the port the Node advertises: 0 when the API is not
// served.
func (o *Options) nodeAPIPort() int32 {
	if !o.NodeAPI.Enabled || o.KubeClient == nil {
		return 0
	}
	if o.NodeAPI.Port == 0 {
		return nodeapi.DefaultPort
	}
	return int32(o.NodeAPI.Port)
}

// nodeAPIServer is the node API with what it runs.
type nodeAPIServer struct {
	server    *nodeapi.Server
	streaming *nodeapi.StreamingServer // nil when the runtime streams
	registry  *prometheus.Registry
	runtime   nodeapi.Runtime
	nodeName  string
	stats     stats.Summarizer            // nil without
	resource  *prometheus.Registry        // /metrics/resource
	serving   *nodeapi.ServingCertificate // nil unless ServerTLSBootstrap

	auth         *nodeapi.Auth // filled by Run
	client       kubeclient.Interface
	clientCAFile string
	anonymous    bool
	log          logr.Logger
}

// The ConfigMap in which the API server publishes the CA of the client
// certificates it accepts (--client-ca-file), as aggregated API servers
// read it.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
	authConfigMapClientCA  = "client-ca-file"
)

// setupAuth fills s.auth: the client CA is ClientCAFile or, without one,
// the API server's published client CA; when neither can be had, only
// bearer tokens authenticate.
func (s *nodeAPIServer) setupAuth(ctx context.Context) error {
	ao := nodeapi.AuthOptions{ClientCAFile: s.clientCAFile, Anonymous: s.anonymous}
	if ao.ClientCAFile == "" {
		cm, err := s.client.CoreV1().ConfigMaps(authConfigMapNamespace).Get(ctx, authConfigMapName, metav1.GetOptions{})
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			s.log.Info("No client CA for the node API: only bearer tokens authenticate (set NodeAPI.ClientCAFile)", "err", err.Error())
		case !pool.AppendCertsFromPEM([]byte(cm.Data[authConfigMapClientCA])):
			s.log.Info("No client CA for the node API: only bearer tokens authenticate (set NodeAPI.ClientCAFile)", "configMap", authConfigMapNamespace+"/"+authConfigMapName)
		default:
			ao.ClientCAs = pool
		}
	}
	auth, err := nodeapi.NewDelegatingAuth(s.client, ao)
	if err != nil {
		return err
	}
	*s.auth = *auth
	return nil
}

// newNodeAPI assembles the node API over the agent's parts; nil when it is
// not served.
func (a *Agent) newNodeAPI() (*nodeAPIServer, error) {
	o := a.opts.NodeAPI
	if !o.Enabled || a.opts.KubeClient == nil {
		return nil, nil
	}
	s := &nodeAPIServer{registry: o.Registry, runtime: a.opts.Runtime, nodeName: a.opts.NodeName}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	s.stats = o.Stats
	if s.stats == nil && a.alive.stats != nil {
		s.stats = a.alive.stats // the eviction manager's
	}
	// The runtime the agent's scope (runtime.WithIdentity) wraps: its CRI
	// client serves stats and streaming, by sandbox and container IDs.
	inner := a.opts.Runtime
	if sc, ok := inner.(runtime.Scoped); ok {
		inner = sc.Unwrap()
	}
	if rc, ok := inner.(runtimeClienter); ok && s.stats == nil {
		p, err := stats.New(stats.Options{NodeName: a.opts.NodeName, Runtime: stats.CRIClient(rc.RuntimeClient()), RootDir: a.opts.RootDir, Logger: a.log})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		s.stats = p
	}
	var resourceMetrics prometheus.Gatherer
	if s.stats != nil {
		s.resource = prometheus.NewRegistry()
		resourceMetrics = s.resource
	}
	streamer := o.Streamer
	if streamer == nil {
		if rc, ok := inner.(runtimeClienter); ok {
			streamer = nodeapi.CRIStreamer(rc.RuntimeClient())
		} else {
			sr, ok := inner.(nodeapi.StreamingRuntime)
			if !ok {
				sr = nodeapi.ExecOnlyRuntime{Runtime: a.opts.Runtime}
			}
			var err error
			if s.streaming, err = nodeapi.NewStreamingServer(sr, nodeapi.StreamingServerOptions{}); err != nil {
				return nil, fmt.Errorf("nodekit: %w", err)
			}
			streamer = s.streaming
		}
	}
	// Filled by Run, which may read the client CA from the API server,
	// before the server starts.
	s.auth = &nodeapi.Auth{}
	s.client = a.opts.KubeClient
	s.clientCAFile, s.anonymous, s.log = o.ClientCAFile, o.Anonymous, a.log
	h, err := nodeapi.New(nodeapi.Options{
		NodeName: a.opts.NodeName,
		Pods:     a.pods,
		Logs: &logs.Provider{Runtime: a.opts.Runtime, Status: func(p *v1.Pod) (v1.PodStatus, bool) {
			return a.statuses.GetPodStatus(p.UID)
		}},
		Runtime:         a.opts.Runtime,
		Streamer:        streamer,
		Stats:           s.stats,
		Metrics:         s.registry,
		ResourceMetrics: resourceMetrics,
		ProbeMetrics:    a.probeMetrics(),
		Health: []nodeapi.HealthCheck{
			{Name: "syncloop", Check: func(*http.Request) error { return a.loop.Healthy() }},
			{Name: "pleg", Check: func(*http.Request) error { return a.events.Healthy() }},
		},
		Auth:   s.auth,
		Logger: a.log,
	})
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	certDir := o.CertDir
	if certDir == "" && o.CertFile == "" {
		certDir = filepath.Join(a.opts.RootDir, "pki")
	}
	hostnames := []string{a.opts.NodeName}
	var ips []net.IP
	if ip := a.opts.Node.InternalIP; ip != nil {
		ips = append(ips, ip)
	}
	so := nodeapi.ServerOptions{
		Address: o.Address, Port: int(a.opts.nodeAPIPort()), Listener: o.Listener,
		CertFile: o.CertFile, KeyFile: o.KeyFile, CertDir: certDir, Hostnames: hostnames, IPs: ips,
		Logger: a.log,
	}
	if o.ServerTLSBootstrap {
		if o.CertFile != "" {
			return nil, errors.New("nodekit: NodeAPI.ServerTLSBootstrap and NodeAPI.CertFile exclude each other")
		}
		s.serving, err = nodeapi.NewServingCertificate(nodeapi.ServingCertificateOptions{
			Client: a.opts.KubeClient.CertificatesV1().CertificateSigningRequests(), NodeName: a.opts.NodeName, Hostnames: hostnames, IPs: ips,
			CertDir: certDir, Logger: a.log,
		})
		if err != nil {
			return nil, fmt.Errorf("nodekit: %w", err)
		}
		so.GetCertificate = s.serving.GetCertificate
	}
	s.server, err = nodeapi.NewServer(h, so)
	if err != nil {
		return nil, fmt.Errorf("nodekit: %w", err)
	}
	return s, nil
}

// probeMetrics is the registry of /metrics/probes; nil without.
func (a *Agent) probeMetrics() prometheus.Gatherer {
	if a.metrics == nil {
		return nil
	}
	return a.metrics.probes
}

// Run serves the node API until ctx ends.
func (s *nodeAPIServer) Run(ctx context.Context) error {
	if err := s.setupAuth(ctx); err != nil {
		return err
	}
	rc := &nodeapi.RuntimeCollector{Context: ctx, Runtime: s.runtime, NodeName: s.nodeName}
	for _, c := range []prometheus.Collector{rc, collectors.NewGoCollector()} {
		if err := s.registry.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("registering metrics: %w", err)
			}
		}
	}
	defer s.registry.Unregister(rc)
	if s.resource != nil {
		r := &stats.ResourceCollector{Context: ctx, Provider: s.stats}
		if err := s.resource.Register(r); err != nil {
			return fmt.Errorf("registering resource metrics: %w", err)
		}
		defer s.resource.Unregister(r)
	}
	g, ctx := errgroup.WithContext(ctx)
	if s.streaming != nil {
		g.Go(func() error { return s.streaming.Run(ctx) })
	}
	if s.serving != nil {
		g.Go(func() error { return s.serving.Run(ctx) })
	}
	g.Go(func() error { return s.server.Run(ctx) })
	return g.Wait()
}
