package nodeserver_test

// The root package's side of the NodeServer contract, checked with a fake
// NodeServer. These tests live here rather than in the root package so
// that its test binary does not link client-go's fake clientset (and its
// scheme of every API group), which the root package's in-process
// benchmarks would then carry.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/nodeserver/hook"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
)

// fakeNodeServer records what the agent does with a NodeServer.
type fakeNodeServer struct {
	port     int32
	setupErr error

	mu       sync.Mutex
	calls    []string // Setup, Attach, Run, Run returned
	parts    hook.Parts
	wrapped  int          // WrapRuntime calls
	hooks    []string     // the hooks called, each kind once
	order    []string     // OnPodStatus before the agent's own observer
	runtimes atomic.Int64 // runtime calls through the wrapper
	forgot   []types.UID  // OnPodForgotten calls
}

func (f *fakeNodeServer) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeNodeServer) hook(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.hooks, name) {
		f.hooks = append(f.hooks, name)
	}
}

func (f *fakeNodeServer) Setup() (hook.Setup, error) {
	f.record("Setup")
	if f.setupErr != nil {
		return hook.Setup{}, f.setupErr
	}
	return hook.Setup{
		Port: f.port,
		WrapRuntime: func(rs runtime.RuntimeService) runtime.RuntimeService {
			f.mu.Lock()
			f.wrapped++
			f.mu.Unlock()
			return countingRuntime{RuntimeService: rs, n: &f.runtimes}
		},
		WrapImages: func(is runtime.ImageService) runtime.ImageService { f.hook("WrapImages"); return is },
		OnRelist:   func(time.Duration, time.Duration) { f.hook("OnRelist") },
		OnSync:     func(string, time.Duration) { f.hook("OnSync") },
		OnPodForgotten: func(uid types.UID) {
			f.mu.Lock()
			f.forgot = append(f.forgot, uid)
			f.mu.Unlock()
		},
		OnPodStatus: func(*v1.Pod, v1.PodStatus) {
			f.hook("OnPodStatus")
			f.mu.Lock()
			f.order = append(f.order, "server")
			f.mu.Unlock()
		},
	}, nil
}

func (f *fakeNodeServer) Attach(p hook.Parts) error {
	f.record("Attach")
	f.mu.Lock()
	f.parts = p
	f.mu.Unlock()
	return nil
}

func (f *fakeNodeServer) Run(ctx context.Context) error {
	f.record("Run")
	<-ctx.Done()
	f.record("Run returned")
	return nil
}

// countingRuntime counts the ListPodSandbox calls made through it.
type countingRuntime struct {
	runtime.RuntimeService
	n *atomic.Int64
}

func (c countingRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	c.n.Add(1)
	return c.RuntimeService.ListPodSandbox(ctx, f)
}

// TestAgentNodeServer checks that the agent calls a NodeServer's Setup,
// Attach and Run in order, reports to its hooks, advertises its port and
// hands it its parts.
func TestAgentNodeServer(t *testing.T) {
	checkLeaks(t)
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	client := fake.NewClientset()
	srv := &fakeNodeServer{port: 12345}
	src := make(chanSource, 1)
	h := startAgent(t, rt, nodekit.Options{
		NodeName:   "node1",
		Sources:    []nodekit.NamedSource{{Name: "test", Source: src}},
		KubeClient: clientset.From(client),
		NodeServer: srv,
	})
	src <- []*v1.Pod{testPod("web")}
	eventually(t, "the pod running", h.running.Load)

	eventually(t, "the server's hooks called", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.hooks) == 4
	})
	srv.mu.Lock()
	hooks := slices.Clone(srv.hooks)
	slices.Sort(hooks)
	if want := []string{"OnPodStatus", "OnRelist", "OnSync", "WrapImages"}; !slices.Equal(hooks, want) {
		t.Errorf("hooks called: %v, want %v", hooks, want)
	}
	// The runtime manager, the PLEG and the exec probes.
	if srv.wrapped != 3 {
		t.Errorf("WrapRuntime called %d times, want 3", srv.wrapped)
	}
	p := srv.parts
	srv.mu.Unlock()
	if srv.runtimes.Load() == 0 {
		t.Error("no runtime call went through WrapRuntime's runtime")
	}
	if p.Pods == nil || p.PodStatus == nil || p.NodeName != "node1" || p.KubeClient == nil || p.Runtime == nil || p.RootDir == "" {
		t.Errorf("Attach got parts %+v", p)
	}
	if _, ok := p.Runtime.(runtime.Scoped); !ok {
		t.Errorf("parts.Runtime is a %T, want the agent's scoped runtime", p.Runtime)
	}
	var names []string
	for _, c := range p.Health {
		names = append(names, c.Name)
		if err := c.Check(); err != nil {
			t.Errorf("health check %s: %v", c.Name, err)
		}
	}
	if want := []string{"syncloop", "pleg"}; !slices.Equal(names, want) {
		t.Errorf("health checks %v, want %v", names, want)
	}
	eventually(t, "the Node advertising the server's port", func() bool {
		n, err := client.CoreV1().Nodes().Get(t.Context(), "node1", metav1.GetOptions{})
		return err == nil && n.Status.DaemonEndpoints.KubeletEndpoint.Port == 12345
	})

	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if want := []string{"Setup", "Attach", "Run", "Run returned"}; !slices.Equal(srv.calls, want) {
		t.Errorf("calls %v, want %v", srv.calls, want)
	}
}

// TestAgentNodeServerForget checks that the server's OnPodForgotten is
// told of a pod deleted while it was running (its phase never terminal),
// so that the node server's per-pod state (the pod start metrics) goes
// with the pod.
func TestAgentNodeServerForget(t *testing.T) {
	checkLeaks(t)
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	srv := &fakeNodeServer{}
	src := make(chanSource, 1)
	h := startAgent(t, rt, nodekit.Options{
		NodeName:           "node1",
		Sources:            []nodekit.NamedSource{{Name: "test", Source: src}},
		KubeClient:         clientset.From(fake.NewClientset()),
		NodeServer:         srv,
		HousekeepingPeriod: 100 * time.Millisecond,
	})
	pod := testPod("web")
	src <- []*v1.Pod{pod}
	eventually(t, "the pod running", h.running.Load)
	srv.mu.Lock()
	forgotEarly := slices.Contains(srv.forgot, pod.UID)
	srv.mu.Unlock()
	if forgotEarly {
		t.Fatal("OnPodForgotten told of a running pod")
	}
	src <- []*v1.Pod{}
	eventually(t, "OnPodForgotten told of the deleted pod", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return slices.Contains(srv.forgot, pod.UID)
	})
}

// TestAgentNodeServerOrder checks that the server's OnPodStatus sees each
// status before Options.OnPodStatus does.
func TestAgentNodeServerOrder(t *testing.T) {
	checkLeaks(t)
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	srv := &fakeNodeServer{}
	src := make(chanSource, 1)
	opts := nodekit.Options{
		NodeName:   "node1",
		Sources:    []nodekit.NamedSource{{Name: "test", Source: src}},
		KubeClient: clientset.From(fake.NewClientset()),
		NodeServer: srv,
		Runtime:    rt,
		RootDir:    t.TempDir(),
	}
	opts.RuntimeManager.PodLogsDir = t.TempDir()
	opts.Cgroups.Disabled = true
	var running atomic.Bool
	opts.OnPodStatus = func(_ *v1.Pod, s v1.PodStatus) {
		srv.mu.Lock()
		srv.order = append(srv.order, "agent")
		srv.mu.Unlock()
		if s.Phase == v1.PodRunning {
			running.Store(true)
		}
	}
	a, err := nodekit.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	src <- []*v1.Pod{testPod("web")}
	eventually(t, "the pod running", running.Load)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.order) == 0 || len(srv.order)%2 != 0 {
		t.Fatalf("observers called %v", srv.order)
	}
	for i := 0; i < len(srv.order); i += 2 {
		if srv.order[i] != "server" || srv.order[i+1] != "agent" {
			t.Fatalf("observers called %v, want the server's before the agent's each time", srv.order)
		}
	}
}

// TestAgentNodeServerStandalone checks that a standalone agent (no
// KubeClient) does not set up a NodeServer, and that a Setup error fails
// New.
func TestAgentNodeServerStandalone(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	base := nodekit.Options{
		NodeName: "node1",
		Sources:  []nodekit.NamedSource{{Name: "test", Source: make(chanSource)}},
		Runtime:  rt,
		RootDir:  t.TempDir(),
	}
	base.Cgroups.Disabled = true

	srv := &fakeNodeServer{}
	o := base
	o.NodeServer = srv
	var logs logLines
	o.Logger = logs.logger()
	if _, err := nodekit.New(o); err != nil {
		t.Fatal(err)
	}
	if len(srv.calls) != 0 {
		t.Errorf("standalone agent called its NodeServer: %v", srv.calls)
	}
	if !logs.contains("Not serving the node API") {
		t.Error("no log line says why the node API is not served")
	}

	bad := &fakeNodeServer{setupErr: errors.New("registry taken")}
	o = base
	o.KubeClient = clientset.From(fake.NewClientset())
	o.NodeServer = bad
	if _, err := nodekit.New(o); err == nil || !errors.Is(err, bad.setupErr) {
		t.Errorf("New with a failing Setup: %v, want its error", err)
	}
}

// harness is an agent running in a test.
type harness struct {
	agent   *nodekit.Agent
	running atomic.Bool // a pod ran
	stop    func() error
}

// startAgent runs an agent over rt with opts until the test ends (or
// stop), its pod logs, root directory and cgroups made for a test.
func startAgent(t *testing.T, rt *runtimetest.Runtime, opts nodekit.Options) *harness {
	t.Helper()
	h := &harness{}
	opts.Runtime = rt
	opts.RootDir = t.TempDir()
	opts.RuntimeManager.PodLogsDir = t.TempDir()
	opts.Cgroups.Disabled = true
	opts.Logger = testr.New(t)
	opts.OnPodStatus = func(_ *v1.Pod, s v1.PodStatus) {
		if s.Phase == v1.PodRunning {
			h.running.Store(true)
		}
	}
	a, err := nodekit.New(opts)
	if err != nil {
		t.Fatalf("nodekit.New: %v", err)
	}
	h.agent = a
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	h.stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Agent.Run: %v", err)
		}
	})
	return h
}

// checkLeaks fails the test if goroutines it started outlive it. It is
// registered before the agent's own clean-up, so it runs after it.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, ignore) })
}

// eventually polls cond every 10ms until it holds, for at most a minute:
// a generous bound, so that a loaded machine does not fail the test; the
// wait ends as soon as cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testPod is a pod of one container.
func testPod(name string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	sources.SetDefaults(p)
	return p
}

// logLines keeps the lines of a logger.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, prefix+" "+args)
		l.mu.Unlock()
	}, funcr.Options{})
}

func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}
