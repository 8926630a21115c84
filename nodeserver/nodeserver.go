package nodeserver

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/metrics"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeapi"
	"github.com/nodekit/nodekit/nodeapi/logs"
	"github.com/nodekit/nodekit/nodeserver/hook"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// Options configure the node API of an agent. The zero value serves the
// kubelet's API on port 10250 with a self-signed certificate.
type Options struct {
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
	// CertDir defaults to the agent's RootDir/pki, as the kubelet's.
	CertDir string
	// ClientCAFile verifies client certificates (the API server's
	// --kubelet-client-certificate is signed by it). Defaults to the
	// client CA the API server publishes (ConfigMap
	// kube-system/extension-apiserver-authentication, key client-ca-file,
	// read when Run starts), which signs that certificate in clusters made
	// by kubeadm; the kubelet has no such default. When it cannot be read,
	// only bearer tokens authenticate, and the server logs why.
	ClientCAFile string
	// NoClusterClientCA turns ClientCAFile's default off: without a
	// ClientCAFile only bearer tokens authenticate, as the kubelet's
	// without authentication.x509.clientCAFile, and the server reads no
	// ConfigMap (a node identity under the Node authorizer may not read
	// that one). Defaults to false.
	NoClusterClientCA bool
	// Anonymous lets requests without credentials in as
	// system:anonymous, still subject to authorization. Defaults to false.
	Anonymous bool
	// Streamer hands out exec, attach and port-forward URLs. Defaults to
	// the runtime's own CRI streaming server when the agent's runtime has
	// a CRI client (a RuntimeClient method, as runtime/cri's), otherwise
	// to a nodeapi.StreamingServer over the runtime when it is a
	// nodeapi.StreamingRuntime, or over its ExecSync (exec only).
	Streamer nodeapi.Streamer
	// Stats serves /stats/summary and /metrics/resource. Defaults to the
	// agent's summary (the one its eviction manager reads), else to a
	// stats.Provider over the runtime's CRI client when it has one, else
	// none (404).
	Stats stats.Summarizer
	// Configz serves /configz, the agent's effective configuration in
	// the kubelet's form {"kubeletconfig": {...}}: an agent configured
	// by a KubeletConfiguration passes kubeletconfig.Settings.Configz.
	// Defaults to nil: /configz answers 404.
	Configz func() ([]byte, error)
	// Registry is the agent's own Prometheus registry, served at
	// /metrics; the server adds its collectors to it: the kubelet's
	// metrics of package metrics, kubelet_running_pods and
	// kubelet_running_containers, and the Go runtime's. Defaults to a new
	// one (never the process-wide registry); two agents must not share
	// one.
	Registry *prometheus.Registry
}

// Server is the node API of one agent: a hook.Server. Make it with
// New, give it to the agent as Options.NodeServer; the agent calls its
// methods (Setup, Attach, Run), each once. Its methods are not meant to be
// called by other code, nor concurrently.
type Server struct {
	opts     Options
	registry *prometheus.Registry
	kubelet  *metrics.Kubelet
	probes   *prometheus.Registry // /metrics/probes

	// Set by Attach.
	attached  bool
	server    *nodeapi.Server
	streaming *nodeapi.StreamingServer // nil when the runtime streams
	runtime   nodeapi.Runtime
	nodeName  string
	stats     stats.Summarizer            // nil without
	resource  *prometheus.Registry        // /metrics/resource; nil without stats
	serving   *nodeapi.ServingCertificate // nil unless ServerTLSBootstrap
	auth      *nodeapi.Auth               // filled by Run
	client    kubeclient.Interface
	log       logr.Logger
}

var _ hook.Server = (*Server)(nil)

// New checks opts and makes the node API of one agent. It does no I/O and
// starts no goroutine.
func New(opts Options) (*Server, error) {
	if opts.ServerTLSBootstrap && opts.CertFile != "" {
		return nil, errors.New("nodeserver: ServerTLSBootstrap and CertFile exclude each other")
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, errors.New("nodeserver: CertFile and KeyFile go together")
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("nodeserver: Port %d out of range", opts.Port)
	}
	s := &Server{opts: opts, registry: opts.Registry}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	return s, nil
}

// Registry is the registry served at /metrics (Options.Registry or the
// server's own).
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// port is the port the Node advertises.
func (s *Server) port() int32 {
	if s.opts.Port == 0 {
		return nodeapi.DefaultPort
	}
	return int32(s.opts.Port)
}

// Setup registers the kubelet's metrics (package metrics) on the registry
// and returns the port and the hooks that feed them. It implements
// hook.Server.
func (s *Server) Setup() (hook.Setup, error) {
	if s.kubelet != nil {
		return hook.Setup{}, errors.New("nodeserver: a Server serves one agent")
	}
	k, err := metrics.New(s.registry)
	if err != nil {
		return hook.Setup{}, fmt.Errorf("nodeserver: Registry: %w", err)
	}
	probes := prometheus.NewRegistry()
	p, err := metrics.NewProbes(probes)
	if err != nil {
		return hook.Setup{}, fmt.Errorf("nodeserver: %w", err)
	}
	s.kubelet, s.probes = k, probes
	return hook.Setup{
		Port:           s.port(),
		WrapRuntime:    k.Runtime,
		WrapImages:     k.Images,
		OnRelist:       k.ObserveRelist,
		OnSync:         k.ObservePodSync,
		OnPodStatus:    k.ObservePodStatus,
		OnPodForgotten: k.ForgetPod,
		OnEvict:        k.ObserveEviction,
		ProbeMetrics:   p,
	}, nil
}

// runtimeClienter is the optional capability of a RuntimeService that
// gives its CRI gRPC client (runtime/cri.Client).
type runtimeClienter interface {
	RuntimeClient() runtimeapi.RuntimeServiceClient
}

// Attach assembles the node API over the agent's parts. It implements
// hook.Server.
func (s *Server) Attach(p hook.Parts) error {
	if s.kubelet == nil {
		return errors.New("nodeserver: Attach before Setup")
	}
	if s.attached {
		return errors.New("nodeserver: a Server serves one agent")
	}
	s.attached = true
	if p.Pods == nil || p.PodStatus == nil || p.Runtime == nil || p.KubeClient == nil {
		return errors.New("nodeserver: Attach needs the agent's pods and statuses, its runtime and its KubeClient")
	}
	o := s.opts
	s.runtime, s.nodeName, s.client, s.log = p.Runtime, p.NodeName, p.KubeClient, p.Logger
	s.stats = o.Stats
	if s.stats == nil {
		s.stats = p.Stats
	}
	// The runtime the agent's scope (runtime.WithIdentity) wraps: its CRI
	// client serves stats and streaming, by sandbox and container IDs.
	inner := p.Runtime
	if sc, ok := inner.(runtime.Scoped); ok {
		inner = sc.Unwrap()
	}
	if rc, ok := inner.(runtimeClienter); ok && s.stats == nil {
		sp, err := stats.New(stats.Options{NodeName: p.NodeName, Runtime: stats.CRIClient(rc.RuntimeClient()), RootDir: p.RootDir, Logger: p.Logger})
		if err != nil {
			return fmt.Errorf("nodeserver: %w", err)
		}
		s.stats = sp
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
				sr = nodeapi.ExecOnlyRuntime{Runtime: p.Runtime}
			}
			var err error
			if s.streaming, err = nodeapi.NewStreamingServer(sr, nodeapi.StreamingServerOptions{}); err != nil {
				return fmt.Errorf("nodeserver: %w", err)
			}
			streamer = s.streaming
		}
	}
	var health []nodeapi.HealthCheck
	for _, c := range p.Health {
		check := c.Check
		health = append(health, nodeapi.HealthCheck{Name: c.Name, Check: func(*http.Request) error { return check() }})
	}
	// Filled by Run, which may read the client CA from the API server,
	// before the server starts.
	s.auth = &nodeapi.Auth{}
	podStatus := p.PodStatus
	h, err := nodeapi.New(nodeapi.Options{
		NodeName: p.NodeName,
		Pods:     nodeapi.PodsFunc(p.Pods),
		Logs: &logs.Provider{Runtime: p.Runtime, Status: func(pod *v1.Pod) (v1.PodStatus, bool) {
			return podStatus(pod.UID)
		}},
		Runtime:         p.Runtime,
		Streamer:        streamer,
		Stats:           s.stats,
		Metrics:         s.registry,
		ResourceMetrics: resourceMetrics,
		ProbeMetrics:    s.probes,
		Health:          health,
		Configz:         o.Configz,
		Spec:            spec,
		Auth:            s.auth,
		Logger:          p.Logger,
	})
	if err != nil {
		return fmt.Errorf("nodeserver: %w", err)
	}
	certDir := o.CertDir
	if certDir == "" && o.CertFile == "" {
		certDir = filepath.Join(p.RootDir, "pki")
	}
	hostnames := []string{p.NodeName}
	var ips []net.IP
	if p.InternalIP != nil {
		ips = append(ips, p.InternalIP)
	}
	so := nodeapi.ServerOptions{
		Address: o.Address, Port: int(s.port()), Listener: o.Listener,
		CertFile: o.CertFile, KeyFile: o.KeyFile, CertDir: certDir, Hostnames: hostnames, IPs: ips,
		Logger: p.Logger,
	}
	if o.ServerTLSBootstrap {
		s.serving, err = nodeapi.NewServingCertificate(nodeapi.ServingCertificateOptions{
			Client: p.KubeClient.CertificatesV1().CertificateSigningRequests(), NodeName: p.NodeName, Hostnames: hostnames, IPs: ips,
			CertDir: certDir, Logger: p.Logger,
		})
		if err != nil {
			return fmt.Errorf("nodeserver: %w", err)
		}
		so.GetCertificate = s.serving.GetCertificate
	}
	if s.server, err = nodeapi.NewServer(h, so); err != nil {
		return fmt.Errorf("nodeserver: %w", err)
	}
	return nil
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
func (s *Server) setupAuth(ctx context.Context) error {
	ao := nodeapi.AuthOptions{ClientCAFile: s.opts.ClientCAFile, Anonymous: s.opts.Anonymous}
	if ao.ClientCAFile == "" && s.opts.NoClusterClientCA {
		s.log.Info("No client CA for the node API: only bearer tokens authenticate (no ClientCAFile)")
	} else if ao.ClientCAFile == "" {
		cm, err := s.client.CoreV1().ConfigMaps(authConfigMapNamespace).Get(ctx, authConfigMapName, metav1.GetOptions{})
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			s.log.Info("No client CA for the node API: only bearer tokens authenticate (set nodeserver.Options.ClientCAFile)", "err", err.Error())
		case !pool.AppendCertsFromPEM([]byte(cm.Data[authConfigMapClientCA])):
			s.log.Info("No client CA for the node API: only bearer tokens authenticate (set nodeserver.Options.ClientCAFile)", "configMap", authConfigMapNamespace+"/"+authConfigMapName)
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

// Run serves the node API until ctx ends, and returns once its
// goroutines have exited. It implements hook.Server.
func (s *Server) Run(ctx context.Context) error {
	if s.server == nil {
		return errors.New("nodeserver: Run before Attach")
	}
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
		r := &metrics.ResourceCollector{Context: ctx, Provider: s.stats}
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

// spec is /spec: the machine as the kubelet's cAdvisor MachineInfo
// names it, the fields nodekit reads (cores, memory, hugepages, the
// machine, system and boot IDs), read at each request.
func spec() ([]byte, error) {
	m, err := node.ReadMachine("")
	if err != nil {
		return nil, err
	}
	type hugePages struct {
		PageSize uint64 `json:"page_size"` // KiB, as cAdvisor
		NumPages uint64 `json:"num_pages"`
	}
	var hp []hugePages
	for size, bytes := range m.HugePages {
		if size > 0 {
			hp = append(hp, hugePages{PageSize: uint64(size) / 1024, NumPages: uint64(bytes / size)})
		}
	}
	slices.SortFunc(hp, func(a, b hugePages) int { return cmp.Compare(a.PageSize, b.PageSize) })
	return json.Marshal(struct {
		NumCores       int64       `json:"num_cores"`
		MemoryCapacity int64       `json:"memory_capacity"`
		HugePages      []hugePages `json:"hugepages"`
		MachineID      string      `json:"machine_id"`
		SystemUUID     string      `json:"system_uuid"`
		BootID         string      `json:"boot_id"`
	}{m.CPUs, m.MemoryBytes, hp, m.MachineID, m.SystemUUID, m.BootID})
}
