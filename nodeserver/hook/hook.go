// Package hook is the contract between an agent (package nodekit) and the
// part that serves its node to the cluster (package nodeserver: the
// kubelet's HTTP API). It holds types only, so that an agent without a
// node server links none of the server's code.
package hook

import (
	"context"
	"net"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubeclient"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/stats"
)

// Server serves an agent's node to the cluster, as the kubelet's HTTP
// API on port 10250 does (kubectl logs, exec, attach, port-forward; stats
// and metrics). Package nodeserver makes the one that serves the
// kubelet's API (nodeserver.New); nodekit.Options.NodeServer takes it.
//
// The node API is a part a program links only when it uses it: the root
// package imports none of its packages (package nodeapi's HTTP server,
// k8s.io/cri-streaming, SPDY, WebSocket, Prometheus), so an agent without
// a NodeServer pays nothing for them: 2.7 MiB of an idle agent's resident
// memory in BenchmarkMemory, mostly pages of the binary their code and
// initialization touch.
//
// The agent calls Setup and then Attach once each from New, and Run once
// from the agent's Run with its other parts. A NodeServer serves one agent.
type Server interface {
	// Setup is called by nodekit.New before it builds the agent's parts: it
	// returns the port the Node advertises and the hooks the parts
	// report to.
	Setup() (Setup, error)
	// Attach is called last in New, with the parts the server serves.
	// The functions and methods it is handed may be called from Run on.
	Attach(Parts) error
	// Run serves until ctx ends and returns after its goroutines have
	// exited: nil then, or the error that stopped it (which stops the
	// agent).
	Run(ctx context.Context) error
}

// Setup is what a NodeServer asks of the agent before its parts
// are built. Every field is optional.
type Setup struct {
	// Port is advertised in the Node's status.daemonEndpoints
	// (kubeletEndpoint) unless nodekit.Options.Node.KubeletPort is set.
	Port int32
	// WrapRuntime wraps the runtime the runtime manager, the PLEG and
	// (unless nodekit.Options.Probes has a Runtime or a Prober) the exec probes
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
	// nodekit.Options.OnPodStatus.
	OnPodStatus func(pod *v1.Pod, status v1.PodStatus)
	// OnPodForgotten is told of each pod whose status the agent forgot
	// (the pod is gone from the node): status.Options.OnForget.
	OnPodForgotten func(uid types.UID)
	// OnEvict is told of each eviction, before
	// nodekit.Options.NodeResources.Eviction.Manager.OnEvict.
	OnEvict func(signal string)
	// ProbeMetrics observes each probe run, unless nodekit.Options.Probes has
	// Metrics.
	ProbeMetrics probe.Metrics
}

// HealthCheck is one named check of the agent's health, as the kubelet's
// /healthz/<name>.
type HealthCheck struct {
	Name  string
	Check func() error
}

// Parts are the parts of an agent a NodeServer serves.
type Parts struct {
	// Pods lists the pods the agent was asked to run, PodStatus gives
	// the status it holds for one (both treat their results as
	// read-only).
	Pods      func() []*v1.Pod
	PodStatus func(types.UID) (v1.PodStatus, bool)
	// NodeName, KubeClient and RootDir are the agent's (nodekit.Options).
	NodeName   string
	KubeClient kubeclient.Interface
	RootDir    string
	// InternalIP is nodekit.Options.Node.InternalIP (nil when not set).
	InternalIP net.IP
	// Runtime is the runtime as the agent's parts call it (scoped to the
	// agent's identity: a runtime.Scoped whose Unwrap is
	// nodekit.Options.Runtime), without WrapRuntime.
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
