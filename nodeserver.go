package nodekit

import (
	"fmt"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/nodeserver/hook"
	"github.com/nodekit/nodekit/runtime"
)

// setUpNodeServer calls the NodeServer's Setup and applies its port and
// hooks to o, before wire builds the parts from it. Only an agent with a
// KubeClient serves the node API: nothing could authorize a request of a
// standalone one.
func setUpNodeServer(o *Options) (nodeServerHooks, error) {
	if o.NodeServer == nil {
		return nodeServerHooks{}, nil
	}
	if o.KubeClient == nil {
		o.Logger.Info("Not serving the node API: Options.NodeServer is used only with a KubeClient, which authorizes its requests", "node", o.NodeName)
		o.NodeServer = nil
		return nodeServerHooks{}, nil
	}
	s, err := o.NodeServer.Setup()
	if err != nil {
		return nodeServerHooks{}, fmt.Errorf("nodekit: NodeServer: %w", err)
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
	return nodeServerHooks{s}, nil
}

// nodeServerHooks are the hooks of the agent's NodeServer (zero without
// one).
type nodeServerHooks struct{ hook.Setup }

// wrapRuntime returns rs wrapped by the node server's hook.
func (s nodeServerHooks) wrapRuntime(rs runtime.RuntimeService) runtime.RuntimeService {
	if s.WrapRuntime == nil {
		return rs
	}
	return s.WrapRuntime(rs)
}

// wrapImages returns is wrapped by the node server's hook.
func (s nodeServerHooks) wrapImages(is runtime.ImageService) runtime.ImageService {
	if s.WrapImages == nil {
		return is
	}
	return s.WrapImages(is)
}

// attachNodeServer hands the node server the assembled agent's parts.
func attachNodeServer(o Options, p *parts, log logr.Logger) error {
	if o.NodeServer == nil {
		return nil
	}
	hp := hook.Parts{
		Pods:       p.handler.Pods().Pods,
		PodStatus:  p.statuses.GetPodStatus,
		NodeName:   o.NodeName,
		KubeClient: o.KubeClient,
		RootDir:    o.RootDir,
		InternalIP: o.Node.InternalIP,
		Runtime:    o.Runtime,
		Health: []hook.HealthCheck{
			{Name: "syncloop", Check: p.loop.Healthy},
			{Name: "pleg", Check: p.pleg.Healthy},
		},
		Logger: log,
	}
	if s := p.upkeep.Stats(); s != nil {
		hp.Stats = s
	}
	if err := o.NodeServer.Attach(hp); err != nil {
		return fmt.Errorf("nodekit: NodeServer: %w", err)
	}
	return nil
}
