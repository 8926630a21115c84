package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/metrics"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// family returns the metric family name from reg, or fails.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

func TestRuntimeOperations(t *testing.T) {
	reg := prometheus.NewRegistry()
	k, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	inner := runtimetest.New(runtimetest.Options{Images: []string{"img"}})
	t.Cleanup(inner.Close)
	rt := k.Runtime(inner)
	if _, ok := rt.(runtime.ContainerEventStreamer); !ok {
		t.Errorf("the wrapper hides the runtime's event stream")
	}
	ctx := context.Background()
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u1"}}
	id, err := rt.RunPodSandbox(ctx, sb, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{runtime.ContainerTypeInit, runtime.ContainerTypeRegular, runtime.ContainerTypeRegular} {
		cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c" + typ}, Image: &runtimeapi.ImageSpec{Image: "img"},
			Annotations: map[string]string{runtime.AnnotationContainerType: typ}}
		if _, err := rt.CreateContainer(ctx, id, cfg, sb); err != nil {
			t.Fatal(err)
		}
	}
	inner.InjectErrorOnce("StopPodSandbox", errors.New("boom"))
	if err := rt.StopPodSandbox(ctx, id); err == nil {
		t.Fatal("no injected error")
	}
	if _, err := rt.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP kubelet_runtime_operations_total Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="create_container"} 3
kubelet_runtime_operations_total{operation_type="list_containers"} 1
kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1
kubelet_runtime_operations_total{operation_type="stop_podsandbox"} 1
# HELP kubelet_runtime_operations_errors_total Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="stop_podsandbox"} 1
# HELP kubelet_started_pods_total Cumulative number of pods started
# TYPE kubelet_started_pods_total counter
kubelet_started_pods_total 1
# HELP kubelet_started_containers_total Cumulative number of containers started
# TYPE kubelet_started_containers_total counter
kubelet_started_containers_total{container_type="container"} 2
kubelet_started_containers_total{container_type="init_container"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total",
		"kubelet_started_pods_total", "kubelet_started_containers_total"); err != nil {
		t.Error(err)
	}
	// The kubelet's buckets: 14 exponential from 5 ms by 2.5.
	h := family(t, reg, "kubelet_runtime_operations_duration_seconds").GetMetric()[0].GetHistogram()
	if b := h.GetBucket(); len(b) != 14 || b[0].GetUpperBound() != 0.005 || b[1].GetUpperBound() != 0.0125 {
		t.Errorf("runtime operation buckets: %v", b)
	}
}

func TestHooks(t *testing.T) {
	reg := prometheus.NewRegistry()
	k, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	k.ObserveRelist(20*time.Millisecond, 0)
	k.ObserveRelist(30*time.Millisecond, time.Second)
	k.ObservePodSync("create", time.Second)
	k.ObservePodSync("sync", time.Millisecond)
	k.ObserveEviction("memory.available")
	if n := testutil.CollectAndCount(reg, "kubelet_pleg_relist_duration_seconds"); n != 1 {
		t.Errorf("relist duration series: %d", n)
	}
	rd := family(t, reg, "kubelet_pleg_relist_duration_seconds").GetMetric()[0].GetHistogram()
	ri := family(t, reg, "kubelet_pleg_relist_interval_seconds").GetMetric()[0].GetHistogram()
	if rd.GetSampleCount() != 2 || ri.GetSampleCount() != 1 || ri.GetSampleSum() != 1 {
		t.Errorf("relist: duration count %d, interval count %d sum %v", rd.GetSampleCount(), ri.GetSampleCount(), ri.GetSampleSum())
	}
	pw := family(t, reg, "kubelet_pod_worker_duration_seconds").GetMetric()
	if len(pw) != 2 || labels(pw[0])["operation_type"] != "create" || pw[0].GetHistogram().GetSampleSum() != 1 {
		t.Errorf("pod worker duration: %v", pw)
	}
	ev := family(t, reg, "kubelet_evictions").GetMetric()
	if len(ev) != 1 || labels(ev[0])["eviction_signal"] != "memory.available" || ev[0].GetCounter().GetValue() != 1 {
		t.Errorf("evictions: %v", ev)
	}
}

func TestPodStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	k, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	images := k.Images(runtimetest.New(runtimetest.Options{}))
	created := time.Now().Add(-10 * time.Second)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	k.ObservePodStatus(pod, v1.PodStatus{Phase: v1.PodPending})
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1"}}
	if _, err := images.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: "registry.example/x:1"}, nil, sb); err != nil {
		t.Fatal(err)
	}
	yes := true
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	oneStarted := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: running, Started: &yes}, {Name: "b", State: running}}}
	k.ObservePodStatus(pod, oneStarted)
	if n := family(t, reg, "kubelet_pod_start_duration_seconds").GetMetric()[0].GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("pod start duration samples: %d", n)
	}
	if n := testutil.CollectAndCount(reg, "kubelet_pod_start_sli_duration_seconds"); n != 0 {
		t.Errorf("SLI observed before every container started: %d series", n)
	}
	allStarted := *oneStarted.DeepCopy()
	allStarted.ContainerStatuses[1].Started = &yes
	k.ObservePodStatus(pod, allStarted)
	k.ObservePodStatus(pod, allStarted) // once only
	sli := family(t, reg, "kubelet_pod_start_sli_duration_seconds").GetMetric()
	if len(sli) != 1 || labels(sli[0])["first_with_network"] != "true" || sli[0].GetHistogram().GetSampleCount() != 1 {
		t.Fatalf("SLI: %v", sli)
	}
	if s := sli[0].GetHistogram().GetSampleSum(); s < 10 || s > 60 {
		t.Errorf("SLI %v s for a pod created 10 s ago", s)
	}
	if b := sli[0].GetHistogram().GetBucket(); len(b) != 25 || b[0].GetUpperBound() != 0.5 || b[24].GetUpperBound() != 3600 {
		t.Errorf("pod start buckets: %v", b)
	}
	// A second pod with its own network is not the first.
	pod2 := pod.DeepCopy()
	pod2.UID = "u2"
	k.ObservePodStatus(pod2, allStarted)
	if n := testutil.CollectAndCount(reg, "kubelet_pod_start_sli_duration_seconds"); n != 2 {
		t.Errorf("SLI series: %d, want first_with_network true and false", n)
	}
}

func TestProbes(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := metrics.NewProbes(reg)
	if err != nil {
		t.Fatal(err)
	}
	tg := probe.Target{Namespace: "ns", Pod: "p", PodUID: "u1", Container: "c"}
	p.ObserveTargetProbe(tg, probe.Readiness, probe.Success, 10*time.Millisecond)
	p.ObserveTargetProbe(tg, probe.Readiness, probe.Failure, 10*time.Millisecond)
	p.ObserveTargetProbe(tg, probe.Liveness, probe.Unknown, 10*time.Millisecond)
	want := `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="unknown"} 1
prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u1",probe_type="Readiness",result="failed"} 1
prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u1",probe_type="Readiness",result="successful"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
	d := family(t, reg, "prober_probe_duration_seconds").GetMetric()
	var readiness uint64
	for _, m := range d {
		if labels(m)["probe_type"] == "Readiness" {
			readiness = m.GetHistogram().GetSampleCount()
		}
	}
	if len(d) != 2 || readiness != 1 {
		t.Errorf("durations: %d series, readiness samples %d (failures are not timed)", len(d), readiness)
	}
	p.ForgetTarget(tg, probe.Readiness)
	if n := testutil.CollectAndCount(reg, "prober_probe_total"); n != 1 {
		t.Errorf("series after the readiness worker stopped: %d, want 1", n)
	}
}

// TestSeparateRegistries: two agents' metrics in one process do not
// share series.
func TestSeparateRegistries(t *testing.T) {
	r1, r2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	k1, err := metrics.New(r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(r2); err != nil {
		t.Fatal(err)
	}
	k1.ObserveEviction("nodefs.available")
	if n := testutil.CollectAndCount(r1, "kubelet_evictions"); n != 1 {
		t.Errorf("first registry: %d series", n)
	}
	if n := testutil.CollectAndCount(r2, "kubelet_evictions"); n != 0 {
		t.Errorf("second registry: %d series, want 0", n)
	}
	if _, err := metrics.New(r1); err == nil {
		t.Errorf("registering twice on one registry: no error")
	}
}

// TestRuntimeWireLists: the wrapper forwards runtime.WireLister, counting
// the calls as the decoded lists, and answers ErrUnimplemented, counting
// nothing, for a runtime without it.
func TestRuntimeWireLists(t *testing.T) {
	reg := prometheus.NewRegistry()
	k, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	inner := runtimetest.New(runtimetest.Options{})
	t.Cleanup(inner.Close)
	ctx := t.Context()
	wl, ok := k.Runtime(runtimetest.Wire{Runtime: inner}).(runtime.WireLister)
	if !ok {
		t.Fatal("the wrapper is no runtime.WireLister")
	}
	if _, err := wl.ListPodSandboxWire(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	inner.InjectErrorOnce("ListContainers", errors.New("boom"))
	if _, err := wl.ListContainersWire(ctx, nil, nil); err == nil {
		t.Fatal("no injected error")
	}
	if _, err := wl.ListContainersWire(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	plain := k.Runtime(inner).(runtime.WireLister)
	if _, err := plain.ListPodSandboxWire(ctx, nil, nil); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("ListPodSandboxWire on a runtime without wire lists = %v, want ErrUnimplemented", err)
	}
	if _, err := plain.ListContainersWire(ctx, nil, nil); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("ListContainersWire on a runtime without wire lists = %v, want ErrUnimplemented", err)
	}
	want := `
# HELP kubelet_runtime_operations_total Cumulative number of runtime operations by operation type.
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="list_containers"} 2
kubelet_runtime_operations_total{operation_type="list_podsandbox"} 1
# HELP kubelet_runtime_operations_errors_total Cumulative number of runtime operation errors by operation type.
# TYPE kubelet_runtime_operations_errors_total counter
kubelet_runtime_operations_errors_total{operation_type="list_containers"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total"); err != nil {
		t.Error(err)
	}
}
