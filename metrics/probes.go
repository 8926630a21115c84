package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/probe"
)

// Probes holds the kubelet's probe metrics of one agent
// (/metrics/probes): prober_probe_total by probe_type, result, container,
// pod, namespace and pod_uid, and prober_probe_duration_seconds by
// probe_type, container, pod and namespace, observed for successful and
// unknown results as the kubelet does. It is a probe.Metrics (with
// probe.TargetMetrics): pass it as probe.Options.Metrics. A worker's
// series are dropped when it stops, as the kubelet's. Safe for concurrent
// use.
type Probes struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewProbes creates the probe metrics and registers them on reg, the
// agent's own probe registry.
func NewProbes(reg prometheus.Registerer) (*Probes, error) {
	if reg == nil {
		return nil, errors.New("metrics: NewProbes needs a registry")
	}
	p := &Probes{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help:    "Duration in seconds for a probe response.",
			Buckets: prometheus.DefBuckets,
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	for _, c := range []prometheus.Collector{p.total, p.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return p, nil
}

var (
	_ probe.Metrics       = (*Probes)(nil)
	_ probe.TargetMetrics = (*Probes)(nil)
)

// probeTypeLabel is the kubelet's probe_type value.
func probeTypeLabel(t probe.Type) string {
	switch t {
	case probe.Liveness:
		return "Liveness"
	case probe.Readiness:
		return "Readiness"
	case probe.Startup:
		return "Startup"
	}
	return "UNKNOWN"
}

func resultLabel(r probe.Result) string {
	switch r {
	case probe.Success:
		return "successful"
	case probe.Failure:
		return "failed"
	}
	return "unknown"
}

// ObserveProbe implements probe.Metrics for callers without a target: it
// records nothing, since the kubelet's series are per container.
func (p *Probes) ObserveProbe(probe.Type, probe.Result, time.Duration) {}

// ObserveTargetProbe implements probe.TargetMetrics.
func (p *Probes) ObserveTargetProbe(t probe.Target, typ probe.Type, r probe.Result, d time.Duration) {
	pt := probeTypeLabel(typ)
	p.total.WithLabelValues(pt, resultLabel(r), t.Container, t.Pod, t.Namespace, string(t.PodUID)).Inc()
	if r != probe.Failure {
		p.duration.WithLabelValues(pt, t.Container, t.Pod, t.Namespace).Observe(d.Seconds())
	}
}

// ForgetTarget implements probe.TargetMetrics: it drops the series of a
// worker that stopped.
func (p *Probes) ForgetTarget(t probe.Target, typ probe.Type) {
	pt := probeTypeLabel(typ)
	for _, r := range []string{"successful", "failed", "unknown"} {
		p.total.DeleteLabelValues(pt, r, t.Container, t.Pod, t.Namespace, string(t.PodUID))
	}
	p.duration.DeleteLabelValues(pt, t.Container, t.Pod, t.Namespace)
}
