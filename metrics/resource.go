package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/stats"
)

// ResourceCollector is a prometheus.Collector of the kubelet's resource
// metrics (/metrics/resource, what metrics-server reads), from a CPU and
// memory summary at each scrape: node, pod and container CPU time and
// working set, container start times, each with its sample's timestamp,
// and resource_scrape_error. Register it on a registry of its own, served
// at /metrics/resource.
type ResourceCollector struct {
	// Context bounds each scrape's runtime calls (the agent's). Required.
	Context context.Context
	// Provider gives the summary. Required.
	Provider stats.Summarizer
	// Timeout bounds one scrape. Defaults to 10 s.
	Timeout time.Duration
}

var (
	descNodeCPU = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	descNodeMemory = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	descPodCPU = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	descPodMemory = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	descContainerCPU = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	descContainerMemory = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	descContainerStart = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	descScrapeError = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *ResourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodeCPU, descNodeMemory, descPodCPU, descPodMemory,
		descContainerCPU, descContainerMemory, descContainerStart, descScrapeError} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ResourceCollector) Collect(ch chan<- prometheus.Metric) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(c.Context, timeout)
	defer cancel()
	s, err := c.Provider.Summary(ctx, true)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, 0)
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, ts time.Time, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(ts, prometheus.MustNewConstMetric(d, t, v, labels...))
	}
	if cpu := s.Node.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		emit(descNodeCPU, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9, cpu.Time.Time)
	}
	if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
		emit(descNodeMemory, prometheus.GaugeValue, float64(*m.WorkingSetBytes), m.Time.Time)
	}
	for _, p := range s.Pods {
		if cpu := p.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
			emit(descPodCPU, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9, cpu.Time.Time, p.PodRef.Name, p.PodRef.Namespace)
		}
		if m := p.Memory; m != nil && m.WorkingSetBytes != nil {
			emit(descPodMemory, prometheus.GaugeValue, float64(*m.WorkingSetBytes), m.Time.Time, p.PodRef.Name, p.PodRef.Namespace)
		}
		for _, ct := range p.Containers {
			if cpu := ct.CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				emit(descContainerCPU, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9, cpu.Time.Time, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
			if m := ct.Memory; m != nil && m.WorkingSetBytes != nil {
				emit(descContainerMemory, prometheus.GaugeValue, float64(*m.WorkingSetBytes), m.Time.Time, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
			if !ct.StartTime.IsZero() {
				ch <- prometheus.MustNewConstMetric(descContainerStart, prometheus.GaugeValue,
					float64(ct.StartTime.UnixNano())/1e9, ct.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
		}
	}
}
