package metrics_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/metrics"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// ExampleNew registers the kubelet's metrics on an agent's own registry
// and hands their hooks to the parts.
func ExampleNew() {
	reg := prometheus.NewRegistry() // the agent's, served at /metrics
	m, err := metrics.New(reg)
	if err != nil {
		panic(err)
	}
	rt := m.Runtime(runtimetest.New(runtimetest.Options{})) // counts runtime operations
	_ = rt
	_ = pleg.GenericOptions{OnRelist: m.ObserveRelist}
	_ = podworker.Options{OnSync: m.ObservePodSync}

	m.ObserveRelist(15*time.Millisecond, time.Second)
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "kubelet_pleg_relist_interval_seconds" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetHistogram().GetSampleSum())
		}
	}
	// Output: kubelet_pleg_relist_interval_seconds 1
}

// ExampleNewProbes serves the probe metrics of /metrics/probes from a
// registry of their own.
func ExampleNewProbes() {
	reg := prometheus.NewRegistry() // the agent's, served at /metrics/probes
	p, err := metrics.NewProbes(reg)
	if err != nil {
		panic(err)
	}
	opts := probe.Options{Metrics: p}
	_ = opts
	p.ObserveTargetProbe(probe.Target{Namespace: "default", Pod: "web", PodUID: "uid-1", Container: "app"}, probe.Readiness, probe.Success, 3*time.Millisecond)
	mfs, _ := reg.Gather()
	fmt.Println(mfs[0].GetName(), len(mfs[0].GetMetric()))
	// Output: prober_probe_duration_seconds 1
}
