package integration

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// startMetricsAgent starts an agent on the in-memory runtime serving the
// node API with the registry reg.
func startMetricsAgent(t *testing.T, path, nodeName string, reg *prometheus.Registry) {
	t.Helper()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"registry.example/busybox:1"}})
	t.Cleanup(rt.Close)
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := nodeserver.New(nodeserver.Options{Listener: ln, Port: ln.Addr().(*net.TCPAddr).Port, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := nodekit.New(nodekit.Options{
		NodeName:       nodeName,
		KubeClient:     newAgentClient(t, path),
		Runtime:        rt,
		RootDir:        t.TempDir(),
		RuntimeManager: podruntime.Options{PodLogsDir: t.TempDir()},
		Cgroups:        cgroup.PodManagerOptions{Disabled: true},
		NodeServer:     srv,
		Logger:         testr.NewWithOptions(t, testr.Options{Verbosity: 0}).WithName(nodeName),
		Node:           node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, nodeName, agent.Run)
}

// scrape reads a node's metrics path through the API server's node proxy
// and parses it with the Prometheus text parser.
func scrape(t *testing.T, c kubernetes.Interface, nodeName, path string) map[string]*dto.MetricFamily {
	t.Helper()
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", path).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("%s of %s: %v", path, nodeName, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("parsing %s of %s: %v", path, nodeName, err)
	}
	return mfs
}

// sum adds the values (counters) or sample counts (histograms) of a
// family's series whose labels include match.
func sum(mf *dto.MetricFamily, match map[string]string) float64 {
	var n float64
	for _, m := range mf.GetMetric() {
		ok := true
		for k, v := range match {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			n += m.GetCounter().GetValue()
		case m.Histogram != nil:
			n += float64(m.GetHistogram().GetSampleCount())
		case m.Gauge != nil:
			n += m.GetGauge().GetValue()
		}
	}
	return n
}

// TestNodeAPIMetricsTwoAgents runs two agents in one process, each with
// its own registry, and a pod with a readiness probe on the first: the
// kubelet's metrics on /metrics and /metrics/probes of the first count
// the pod, the second's count nothing of it.
func TestNodeAPIMetricsTwoAgents(t *testing.T) {
	path := kubeconfig(t)
	c := newClient(t, path)
	nodeA, nodeB := uniqueName("metrics-a"), uniqueName("metrics-b")
	cleanupNode(t, c, nodeA)
	cleanupNode(t, c, nodeB)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	startMetricsAgent(t, path, nodeA, regA)
	startMetricsAgent(t, path, nodeB, regB)

	pod := newPod(uniqueName("probed"), nodeA)
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1,
	}
	pod = createPod(t, c, pod)
	eventually(t, 60*time.Second, "the pod ready", func() error {
		p, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready {
			return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
		}
		return nil
	})

	a := scrape(t, c, nodeA, "metrics")
	b := scrape(t, c, nodeB, "metrics")
	for _, tc := range []struct {
		name  string
		match map[string]string
		min   float64
	}{
		{"kubelet_started_pods_total", nil, 1},
		{"kubelet_started_containers_total", map[string]string{"container_type": "container"}, 1},
		{"kubelet_runtime_operations_total", map[string]string{"operation_type": "run_podsandbox"}, 1},
		{"kubelet_runtime_operations_duration_seconds", map[string]string{"operation_type": "create_container"}, 1},
		{"kubelet_pod_start_duration_seconds", nil, 1},
		{"kubelet_pod_start_sli_duration_seconds", map[string]string{"first_with_network": "true"}, 1},
		{"kubelet_pod_worker_duration_seconds", map[string]string{"operation_type": "create"}, 1},
		{"kubelet_pleg_relist_duration_seconds", nil, 1},
		{"kubelet_running_pods", nil, 1},
		{"kubelet_running_containers", map[string]string{"container_state": "running"}, 1},
	} {
		mf := a[tc.name]
		if mf == nil {
			t.Errorf("%s: missing from the first agent's /metrics", tc.name)
			continue
		}
		if got := sum(mf, tc.match); got < tc.min {
			t.Errorf("%s%v of the first agent: %v, want at least %v", tc.name, tc.match, got, tc.min)
		}
	}
	for _, name := range []string{"kubelet_started_pods_total", "kubelet_pod_start_duration_seconds", "kubelet_running_pods"} {
		if got := sum(b[name], nil); got != 0 {
			t.Errorf("%s of the second agent: %v, want 0 (separate registries)", name, got)
		}
	}

	probes := scrape(t, c, nodeA, "metrics/probes")
	match := map[string]string{"probe_type": "Readiness", "result": "successful", "pod": pod.Name, "namespace": pod.Namespace, "pod_uid": string(pod.UID), "container": "c"}
	if got := sum(probes["prober_probe_total"], match); got < 1 {
		t.Errorf("prober_probe_total%v: %v, want at least 1; families %v", match, got, probes)
	}
	if got := sum(probes["prober_probe_duration_seconds"], map[string]string{"probe_type": "Readiness", "pod": pod.Name}); got < 1 {
		t.Errorf("prober_probe_duration_seconds samples: %v", got)
	}
	if got := sum(scrape(t, c, nodeB, "metrics/probes")["prober_probe_total"], nil); got != 0 {
		t.Errorf("prober_probe_total of the second agent: %v", got)
	}
}
