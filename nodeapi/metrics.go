package nodeapi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeCollector is a prometheus.Collector of the kubelet's gauges that
// the runtime's state gives, read at each scrape: kubelet_running_pods
// (pods with a ready sandbox) and kubelet_running_containers by
// container_state, and kubelet_node_name. Register it on the agent's own
// registry.
type RuntimeCollector struct {
	// Context bounds the runtime calls (the agent's: a scrape after it
	// ends reports errors). Required.
	Context  context.Context
	Runtime  Runtime
	NodeName string
	// Timeout bounds the runtime calls of one scrape. Defaults to 10 s.
	Timeout time.Duration
}

var (
	descRunningPods = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running pod sandbox", nil, nil)
	descRunningContainers = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running", []string{"container_state"}, nil)
	descNodeName = prometheus.NewDesc("kubelet_node_name",
		"The node's name. The count is always 1.", []string{"node"}, nil)
)

// Describe implements prometheus.Collector.
func (c *RuntimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRunningPods
	ch <- descRunningContainers
	ch <- descNodeName
}

// Collect implements prometheus.Collector.
func (c *RuntimeCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descNodeName, prometheus.GaugeValue, 1, c.NodeName)
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// A scrape has no context of its own.
	ctx, cancel := context.WithTimeout(c.Context, timeout)
	defer cancel()
	sandboxes, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRunningPods, err)
	} else {
		ch <- prometheus.MustNewConstMetric(descRunningPods, prometheus.GaugeValue, float64(len(sandboxes)))
	}
	containers, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRunningContainers, err)
		return
	}
	counts := map[string]int{"running": 0, "exited": 0, "created": 0, "unknown": 0}
	for _, ctr := range containers {
		switch ctr.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			counts["running"]++
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			counts["exited"]++
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			counts["created"]++
		default:
			counts["unknown"]++
		}
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(descRunningContainers, prometheus.GaugeValue, float64(n), state)
	}
}
