package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The kubelet's histogram buckets.
var (
	// podStartBuckets are the kubelet's podStartupDurationBuckets.
	podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	// runtimeOperationBuckets are the kubelet's for
	// kubelet_runtime_operations_duration_seconds.
	runtimeOperationBuckets = prometheus.ExponentialBuckets(.005, 2.5, 14)
)

// Kubelet holds the kubelet's metrics of one agent, registered on the
// agent's own registry. Its methods are the observer hooks of nodekit's
// parts (pleg, podworker, eviction, status) and wrappers of the runtime;
// all are safe for concurrent use and never block. It lives as long as its
// registry.
type Kubelet struct {
	podStartDuration   prometheus.Histogram
	podStartSLI        *prometheus.HistogramVec
	plegRelistDuration prometheus.Histogram
	plegRelistInterval prometheus.Histogram
	podWorkerDuration  *prometheus.HistogramVec
	runtimeOps         *prometheus.CounterVec
	runtimeOpErrors    *prometheus.CounterVec
	runtimeOpDuration  *prometheus.HistogramVec
	evictions          *prometheus.CounterVec
	startedPods        prometheus.Counter
	startedContainers  *prometheus.CounterVec

	starts podStarts
}

// New creates the kubelet's metrics and registers them on reg, which must
// be the agent's own registry (never prometheus.DefaultRegisterer: two
// agents in one process must not share series).
func New(reg prometheus.Registerer) (*Kubelet, error) {
	if reg == nil {
		return nil, errors.New("metrics: New needs a registry")
	}
	k := &Kubelet{
		podStartDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartBuckets,
		}),
		podStartSLI: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartBuckets,
		}, []string{"first_with_network"}),
		plegRelistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help:    "Duration in seconds for relisting pods in PLEG.",
			Buckets: prometheus.DefBuckets,
		}),
		plegRelistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help:    "Interval in seconds between relisting in PLEG.",
			Buckets: prometheus.DefBuckets,
		}),
		podWorkerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
			Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		runtimeOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		runtimeOpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
		runtimeOpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "runtime_operations_duration_seconds",
			Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: runtimeOperationBuckets,
		}, []string{"operation_type"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evictions",
			Help: "Cumulative number of pod evictions by eviction signal",
		}, []string{"eviction_signal"}),
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "started_pods_total",
			Help: "Cumulative number of pods started",
		}),
		startedContainers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "started_containers_total",
			Help: "Cumulative number of containers started",
		}, []string{"container_type"}),
	}
	k.starts.init()
	for _, c := range []prometheus.Collector{
		k.podStartDuration, k.podStartSLI, k.plegRelistDuration, k.plegRelistInterval,
		k.podWorkerDuration, k.runtimeOps, k.runtimeOpErrors, k.runtimeOpDuration,
		k.evictions, k.startedPods, k.startedContainers,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return k, nil
}

// ObserveRelist records a PLEG relist: a pleg.GenericOptions.OnRelist
// (and EventedOptions.OnRelist). A zero interval (the first relist) is
// not recorded.
func (k *Kubelet) ObserveRelist(duration, interval time.Duration) {
	k.plegRelistDuration.Observe(duration.Seconds())
	if interval > 0 {
		k.plegRelistInterval.Observe(interval.Seconds())
	}
}

// ObservePodSync records a pod worker's sync: a podworker.Options.OnSync.
func (k *Kubelet) ObservePodSync(operation string, d time.Duration) {
	k.podWorkerDuration.WithLabelValues(operation).Observe(d.Seconds())
}

// ObserveEviction counts an eviction: an eviction.Options.OnEvict.
func (k *Kubelet) ObserveEviction(signal string) {
	k.evictions.WithLabelValues(signal).Inc()
}

// recordOperation counts a runtime operation, as the kubelet's
// instrumented runtime service.
func (k *Kubelet) recordOperation(op string, start time.Time, err error) {
	k.runtimeOps.WithLabelValues(op).Inc()
	k.runtimeOpDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		k.runtimeOpErrors.WithLabelValues(op).Inc()
	}
}
