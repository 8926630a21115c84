package nodekit

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// NodeServer serves an agent's node to the cluster, as the kubelet's HTTP
// API on port 10250 does (kubectl logs, exec, attach, port-forward; stats
// and metrics). Package nodeserver makes the one that serves the
// kubelet's API (nodeserver.New); Options.NodeServer takes it.
//
// The node API is a part a program links only when it uses it: the root
// package imports none of its packages (package nodeapi's HTTP server,
// k8s.io/cri-streaming, SPDY, WebSocket, Prometheus), so an agent without
// a NodeServer pays nothing for them: 2.7 MiB of an idle agent's resident
// memory in BenchmarkMemory, mostly pages of the binary their code and
// initialization touch.
//
// The agent calls Setup and then Attach once each from New, and Run once
// from Agent.Run with its other parts. A NodeServer serves one agent.
type NodeServer interface {
	// Setup is called by New before it builds the agent's parts: it
	// returns the port the Node advertises and the hooks the parts
	// report to.
	Setup() (NodeServerSetup, error)
	// Attach is called last in New, with the parts the server serves.
	// The functions and methods it is handed may be called from Run on.
	Attach(NodeServerParts) error
	// Run serves until ctx ends and returns after its goroutines have
	// exited: nil then, or the error that stopped it (which stops the
	// agent).
	Run(ctx context.Context) error
}

// NodeServerSetup is what a NodeServer asks of the agent before its parts
// are built. Every field is optional.
type NodeServerSetup struct {
	// Port is advertised in the Node's status.daemonEndpoints
	// (kubeletEndpoint) unless Options.Node.KubeletPort is set.
	Port int32
	// WrapRuntime wraps the runtime the runtime manager, the PLEG and
	// (unless Options.Probes has a Runtime or a Prober) the exec probes
	// call, e.g. to count the runtime operations.
	WrapRuntime func(runtime.RuntimeService) runtime.RuntimeService
	// WrapImages wraps the image service the runtime manager calls.
	WrapImages func(runtime.ImageService) runtime.ImageService
	// OnRelist is the PLEG's hook (pleg.EventedOptions.OnRelist), for
	// the default PLEG (Options.PLEG nil).
	OnRelist func(duration, interval time.Duration)
	// OnSync is the pod workers' hook (podworker.Options.OnSync).
	OnSync func(operation string, d time.Duration)
	// OnPodStatus is told of each change of a pod's status, before
	// Options.OnPodStatus.
	OnPodStatus func(pod *v1.Pod, status v1.PodStatus)
	// OnEvict is told of each eviction, before
	// Options.NodeResources.Eviction.Manager.OnEvict.
	OnEvict func(signal string)
	// ProbeMetrics observes each probe run, unless Options.Probes has
	// Metrics.
	ProbeMetrics probe.Metrics
}

// HealthCheck is one named check of the agent's health, as the kubelet's
// /healthz/<name>.
type HealthCheck struct {
	Name  string
	Check func() error
}

// NodeServerParts are the parts of an agent a NodeServer serves.
type NodeServerParts struct {
	// Agent gives the pods (Pods) and their statuses (PodStatus).
	Agent *Agent
	// NodeName, KubeClient and RootDir are the agent's (Options).
	NodeName   string
	KubeClient kubeclient.Interface
	RootDir    string
	// InternalIP is Options.Node.InternalIP (nil when not set).
	InternalIP net.IP
	// Runtime is the runtime as the agent's parts call it (scoped to the
	// agent's identity: a runtime.Scoped whose Unwrap is
	// Options.Runtime), without WrapRuntime.
	Runtime runtime.RuntimeService
	// Stats is the summary the eviction manager reads; nil when the
	// agent keeps none.
	Stats stats.Summarizer
	// Health are the agent's checks: "syncloop" (the sync loop
	// iterates) and "pleg" (the PLEG relists).
	Health []HealthCheck
	// Logger is the agent's.
	Logger logr.Logger
}

// setUpNodeServer calls the NodeServer's Setup and applies its port and
// hooks to opts, before New builds the parts from them. Only an agent with
// a KubeClient serves the node API: nothing could authorize a request of
// a standalone one.
func setUpNodeServer(o *Options) (NodeServerSetup, error) {
	if o.NodeServer == nil {
		return NodeServerSetup{}, nil
	}
	if o.KubeClient == nil {
		o.Logger.Info("Not serving the node API: Options.NodeServer is used only with a KubeClient, which authorizes its requests", "node", o.NodeName)
		o.NodeServer = nil
		return NodeServerSetup{}, nil
	}
	s, err := o.NodeServer.Setup()
	if err != nil {
		return NodeServerSetup{}, fmt.Errorf("nodekit: NodeServer: %w", err)
	}
	if o.Node.KubeletPort == 0 {
		o.Node.KubeletPort = s.Port
	}
	if o.Probes.Metrics == nil {
		o.Probes.Metrics = s.ProbeMetrics
	}
	if o.Probes.Runtime == nil && o.Probes.Prober == nil && s.WrapRuntime != nil {
		o.Probes.Runtime = s.WrapRuntime(o.Runtime)
	}
	if h := s.OnPodStatus; h != nil {
		if prev := o.OnPodStatus; prev != nil {
			o.OnPodStatus = func(pod *v1.Pod, st v1.PodStatus) {
				h(pod, st)
				prev(pod, st)
			}
		} else {
			o.OnPodStatus = h
		}
	}
	if h := s.OnEvict; h != nil {
		if prev := o.NodeResources.Eviction.Manager.OnEvict; prev != nil {
			o.NodeResources.Eviction.Manager.OnEvict = func(signal string) {
				h(signal)
				prev(signal)
			}
		} else {
			o.NodeResources.Eviction.Manager.OnEvict = h
		}
	}
	return s, nil
}

// nodeServerHook holds the hooks of the agent's NodeServer (zero without one).
type nodeServerHook struct{ NodeServerSetup }

// wrapRuntime returns rs wrapped by the node server's hook.
func (s nodeServerHook) wrapRuntime(rs runtime.RuntimeService) runtime.RuntimeService {
	if s.WrapRuntime == nil {
		return rs
	}
	return s.WrapRuntime(rs)
}

// wrapImages returns is wrapped by the node server's hook.
func (s nodeServerHook) wrapImages(is runtime.ImageService) runtime.ImageService {
	if s.WrapImages == nil {
		return is
	}
	return s.WrapImages(is)
}

// runtimeClienter is the optional capability of a RuntimeService that
// gives its CRI gRPC client (runtime/cri.Client).
type runtimeClienter interface {
	RuntimeClient() runtimeapi.RuntimeServiceClient
}

// attachNodeServer hands the node server the assembled agent's parts.
func (a *Agent) attachNodeServer() error {
	if a.opts.NodeServer == nil {
		return nil
	}
	p := NodeServerParts{
		Agent:      a,
		NodeName:   a.opts.NodeName,
		KubeClient: a.opts.KubeClient,
		RootDir:    a.opts.RootDir,
		InternalIP: a.opts.Node.InternalIP,
		Runtime:    a.opts.Runtime,
		Health: []HealthCheck{
			{Name: "syncloop", Check: a.loop.Healthy},
			{Name: "pleg", Check: a.events.Healthy},
		},
		Logger: a.log,
	}
	if a.alive.stats != nil {
		p.Stats = a.alive.stats
	}
	if err := a.opts.NodeServer.Attach(p); err != nil {
		return fmt.Errorf("nodekit: NodeServer: %w", err)
	}
	return nil
}
