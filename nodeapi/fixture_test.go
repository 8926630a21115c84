package nodeapi_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/nodeapi"
	"github.com/nodekit/nodekit/nodeapi/logs"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// fixture is a node with one pod "default/web" (container "app") running
// in the in-memory runtime, its log file holding logLines.
type fixture struct {
	rt       *runtimetest.Runtime
	pod      *v1.Pod
	ctrID    string
	sandbox  string
	logPath  string
	registry *prometheus.Registry
}

const logLines = "2016-10-06T00:17:09.669794202Z stdout F hello\n2016-10-06T00:17:10.669794202Z stderr F oops\n"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	dir := t.TempDir()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		Labels:       map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "uid-1"},
		LogDirectory: dir,
	}
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   map[string]string{"io.kubernetes.pod.uid": "uid-1", "io.kubernetes.container.name": "app"},
		LogPath:  "app/0.log",
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "app", "0.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte(logLines), 0o644); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{
		Name: "app", ContainerID: "cri://" + id,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "nodekit_test_total", Help: "A test counter."}))
	return &fixture{rt: rt, pod: pod, ctrID: id, sandbox: sb, logPath: logPath, registry: reg}
}

type summaryFunc func(ctx context.Context, only bool) (*statsapi.Summary, error)

func (f summaryFunc) Summary(ctx context.Context, only bool) (*statsapi.Summary, error) {
	return f(ctx, only)
}

// options returns handler options serving every path from the fixture.
func (f *fixture) options(streamer nodeapi.Streamer) nodeapi.Options {
	return nodeapi.Options{
		NodeName: "node-1",
		Pods:     nodeapi.PodsFunc(func() []*v1.Pod { return []*v1.Pod{f.pod} }),
		Logs:     &logs.Provider{Runtime: f.rt},
		Runtime:  f.rt,
		Streamer: streamer,
		Stats: summaryFunc(func(context.Context, bool) (*statsapi.Summary, error) {
			return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-1"}}, nil
		}),
		Metrics:         f.registry,
		ResourceMetrics: f.registry,
		ProbeMetrics:    f.registry,
		Health:          []nodeapi.HealthCheck{{Name: "syncloop", Check: func(*http.Request) error { return nil }}},
	}
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }
