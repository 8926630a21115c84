package nodeserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/nodeserver"
	"github.com/nodekit/nodekit/nodeserver/hook"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

func TestNewValidates(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts nodeserver.Options
		ok   bool
	}{
		{"zero", nodeserver.Options{}, true},
		{"cert pair", nodeserver.Options{CertFile: "c", KeyFile: "k"}, true},
		{"bootstrap", nodeserver.Options{ServerTLSBootstrap: true}, true},
		{"bootstrap and cert", nodeserver.Options{ServerTLSBootstrap: true, CertFile: "c", KeyFile: "k"}, false},
		{"cert without key", nodeserver.Options{CertFile: "c"}, false},
		{"port out of range", nodeserver.Options{Port: 70000}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nodeserver.New(tt.opts)
			if (err == nil) != tt.ok {
				t.Errorf("New: %v, want ok %t", err, tt.ok)
			}
		})
	}
}

func TestLifecycleOrder(t *testing.T) {
	s, err := nodeserver.New(nodeserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(hook.Parts{}); err == nil {
		t.Error("Attach before Setup: no error")
	}
	if err := s.Run(t.Context()); err == nil {
		t.Error("Run before Attach: no error")
	}
	setup, err := s.Setup()
	if err != nil {
		t.Fatal(err)
	}
	if setup.Port != 10250 || setup.WrapRuntime == nil || setup.WrapImages == nil || setup.OnRelist == nil ||
		setup.OnSync == nil || setup.OnPodStatus == nil || setup.OnEvict == nil || setup.ProbeMetrics == nil {
		t.Errorf("Setup = %+v, want the default port and every hook", setup)
	}
	if _, err := s.Setup(); err == nil {
		t.Error("second Setup: no error")
	}
	if err := s.Attach(hook.Parts{}); err == nil {
		t.Error("Attach without an agent: no error")
	}

	// Two servers on one registry: the second one's metrics collide.
	reg := prometheus.NewRegistry()
	for i, want := range []bool{true, false} {
		s, err := nodeserver.New(nodeserver.Options{Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Setup(); (err == nil) != want {
			t.Errorf("Setup of server %d on a shared registry: %v", i, err)
		}
	}
}

// TestServe runs an agent with a node server over the in-memory runtime
// and a fake API client that allows every SubjectAccessReview, and reads
// its API over TLS as an anonymous caller.
func TestServe(t *testing.T) {
	for _, noClusterCA := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoClusterClientCA=%t", noClusterCA), func(t *testing.T) { testServe(t, noClusterCA) })
	}
}

func testServe(t *testing.T, noClusterCA bool) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) })
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	client := fake.NewClientset()
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = sar.Spec.ResourceAttributes != nil && sar.Spec.ResourceAttributes.Resource == "nodes"
		return true, sar, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv, err := nodeserver.New(nodeserver.Options{Listener: ln, Port: port, Anonymous: true, NoClusterClientCA: noClusterCA,
		Configz: func() ([]byte, error) { return []byte(`{"kubeletconfig":{"maxPods":110}}`), nil }})
	if err != nil {
		t.Fatal(err)
	}
	pods := make(chan []*v1.Pod, 1)
	opts := nodekit.Options{
		NodeName:   "node1",
		Sources:    []nodekit.NamedSource{{Name: "test", Source: chanSource(pods)}},
		Runtime:    rt,
		KubeClient: clientset.From(client),
		RootDir:    t.TempDir(),
		NodeServer: srv,
		Logger:     testr.New(t),
		Node:       node.Options{Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}},
	}
	opts.RuntimeManager.PodLogsDir = t.TempDir()
	opts.Cgroups.Disabled = true
	running := make(chan struct{})
	var once sync.Once
	opts.OnPodStatus = func(_ *v1.Pod, s v1.PodStatus) {
		if s.Phase == v1.PodRunning {
			once.Do(func() { close(running) })
		}
	}
	agent, err := nodekit.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-web")},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	sources.SetDefaults(pod)
	pods <- []*v1.Pod{pod}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t.Cleanup(hc.CloseIdleConnections)
	base := "https://" + ln.Addr().String()
	get := func(path string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	select {
	case <-running:
	case <-time.After(time.Minute): // a generous bound for a loaded machine
		t.Fatal("the pod is not running after a minute")
	}
	code, body := get("/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Items) != 1 || list.Items[0].UID != pod.UID {
		t.Errorf("/pods: %d %s (%v), want the pod", code, body, err)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body = get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	// Fed by the hooks (runtime operations, relists, syncs, pod start)
	// and by Run's collectors.
	for _, want := range []string{
		`kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1`,
		"kubelet_pleg_relist_duration_seconds_count",
		"kubelet_pod_worker_duration_seconds_count",
		"kubelet_pod_start_duration_seconds_count 1",
		"kubelet_running_pods 1",
		`kubelet_node_name{node="node1"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	n, err := client.CoreV1().Nodes().Get(t.Context(), "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != int32(port) {
		t.Errorf("Node advertises port %d, want %d", got, port)
	}
	if code, body := get("/configz"); code != http.StatusOK || body != `{"kubeletconfig":{"maxPods":110}}` {
		t.Errorf("/configz: %d %q", code, body)
	}
	var spec struct {
		NumCores       int   `json:"num_cores"`
		MemoryCapacity int64 `json:"memory_capacity"`
	}
	if code, body := get("/spec/"); code != http.StatusOK || json.Unmarshal([]byte(body), &spec) != nil || spec.NumCores < 1 || spec.MemoryCapacity <= 0 {
		t.Errorf("/spec/: %d %q", code, body)
	}
	// The published client CA is read unless NoClusterClientCA.
	reads := 0
	for _, a := range client.Actions() {
		if g, ok := a.(k8stesting.GetAction); ok && a.GetResource().Resource == "configmaps" && g.GetName() == "extension-apiserver-authentication" {
			reads++
		}
	}
	if want := map[bool]int{false: 1, true: 0}[noClusterCA]; reads != want {
		t.Errorf("reads of the published client CA: %d, want %d", reads, want)
	}
}

// chanSource is a source the test feeds with snapshots.
type chanSource = sources.Chan
