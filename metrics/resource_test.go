package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/metrics"
)

// summaryFunc is a stats.Summarizer.
type summaryFunc func(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)

func (f summaryFunc) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	return f(ctx, onlyCPUAndMemory)
}

func TestResourceCollector(t *testing.T) {
	ts := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	u := func(v uint64) *uint64 { return &v }
	cpu := func(ns uint64) *statsapi.CPUStats { return &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: u(ns)} }
	mem := func(b uint64) *statsapi.MemoryStats { return &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u(b)} }
	var cpuOnly []bool
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{CPU: cpu(2e9), Memory: mem(2 << 30)},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "pod000", Namespace: "ns"},
			CPU:    cpu(1e9), Memory: mem(1 << 20),
			Containers: []statsapi.ContainerStats{{Name: "c", StartTime: ts, CPU: cpu(1e9), Memory: mem(1 << 20)}},
		}},
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&metrics.ResourceCollector{Context: t.Context(), Provider: summaryFunc(func(_ context.Context, only bool) (*statsapi.Summary, error) {
		cpuOnly = append(cpuOnly, only)
		return summary, nil
	})})
	want := `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="c",namespace="ns",pod="pod000"} 1 1767225600000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="c",namespace="ns",pod="pod000"} 1.048576e+06 1767225600000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="c",namespace="ns",pod="pod000"} 1.7672256e+09
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 2 1767225600000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2.147483648e+09 1767225600000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="ns",pod="pod000"} 1 1767225600000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="ns",pod="pod000"} 1.048576e+06 1767225600000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if len(cpuOnly) != 1 || !cpuOnly[0] {
		t.Errorf("Summary called with onlyCPUAndMemory %v, want one call with true", cpuOnly)
	}
}

func TestResourceCollectorError(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&metrics.ResourceCollector{Context: t.Context(), Provider: summaryFunc(func(context.Context, bool) (*statsapi.Summary, error) {
		return nil, errors.New("runtime down")
	})})
	want := `
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
