package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

// The wiring the agent relies on: the runtime service runs exec probes and
// Unhealthy is the runtime manager's UnhealthyFunc.
var (
	_ Execer                   = runtime.RuntimeService(nil)
	_ podruntime.UnhealthyFunc = (*Manager)(nil).Unhealthy
)

func TestNewManagerOptions(t *testing.T) {
	statuses := func(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }
	exec := ExecerFunc(func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) { return nil, nil, nil })
	prober := ProberFunc(func(context.Context, Request) (Result, string, error) { return Success, "", nil })
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no runtime nor prober", Options{}, "probe: Options.Runtime is required when Options.Prober is not set"},
		{"runtime", Options{Runtime: exec}, ""},
		{"prober", Options{Prober: prober}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(statuses, tc.opts)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err == nil {
				if _, ok := m.opts.Prober.(*DefaultProber); ok != (tc.opts.Prober == nil) {
					t.Errorf("prober = %T", m.opts.Prober)
				}
				if cap(m.Liveness()) != 20 || cap(m.Readiness()) != 20 || cap(m.Startup()) != 20 {
					t.Errorf("channel capacities %d %d %d, want 20", cap(m.Liveness()), cap(m.Readiness()), cap(m.Startup()))
				}
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		synctest.Wait()
		if err := h.m.Run(t.Context()); err == nil {
			t.Error("second Run = nil, want an error")
		}
		stop()
	})
}

func boolp(b bool) *bool { return &b }

func TestUpdatePodStatus(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "p1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "init"},
				{Name: "sidecar", RestartPolicy: &always, ReadinessProbe: execProbe(nil)},
			},
			Containers: []v1.Container{
				{Name: "plain"},
				{Name: "ready", ReadinessProbe: execProbe(nil)},
				{Name: "unready", ReadinessProbe: execProbe(nil)},
				{Name: "unprobed", ReadinessProbe: execProbe(nil)},
				{Name: "starting", StartupProbe: execProbe(nil), ReadinessProbe: execProbe(nil)},
				{Name: "started", StartupProbe: execProbe(nil)},
				{Name: "stale", StartupProbe: execProbe(nil), ReadinessProbe: execProbe(nil)},
				{Name: "exited", ReadinessProbe: execProbe(nil)},
				{Name: "waiting"},
			},
		},
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	cs := func(name string, state v1.ContainerState) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: "fake://" + name, State: state}
	}
	status := v1.PodStatus{
		InitContainerStatuses: []v1.ContainerStatus{
			cs("init", v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}),
			cs("sidecar", running),
		},
		ContainerStatuses: []v1.ContainerStatus{
			cs("plain", running),
			cs("ready", running),
			cs("unready", running),
			cs("unprobed", running),
			cs("starting", running),
			cs("started", running),
			cs("stale", running),
			cs("exited", v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}),
			{Name: "waiting", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}},
		},
	}
	m, err := NewManager(func(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }, Options{Prober: ProberFunc(nil)})
	if err != nil {
		t.Fatal(err)
	}
	m.AddPod(pod) // workers exist (not running: Run was not called)
	m.readiness.set("ready", Success, pod.UID, nil)
	m.readiness.set("unready", Failure, pod.UID, nil)
	m.readiness.set("sidecar", Success, pod.UID, nil)
	m.readiness.set("exited", Success, pod.UID, nil)
	m.startup.set("starting", Unknown, pod.UID, nil)
	m.startup.set("started", Success, pod.UID, nil)
	m.startup.set("stale", Failure, pod.UID, nil)
	m.readiness.set("stale", Success, pod.UID, nil)

	m.UpdatePodStatus(pod, &status)
	type flags struct {
		Name    string
		Started *bool
		Ready   bool
	}
	var got []flags
	for _, s := range append(status.InitContainerStatuses, status.ContainerStatuses...) {
		got = append(got, flags{s.Name, s.Started, s.Ready})
	}
	want := []flags{
		{"init", boolp(false), true},
		{"sidecar", boolp(true), true},
		{"plain", boolp(true), true},
		{"ready", boolp(true), true},
		{"unready", boolp(true), false},
		{"unprobed", boolp(true), false},
		{"starting", boolp(false), false},
		{"started", boolp(true), true},
		{"stale", boolp(false), false}, // never ready before started
		{"exited", boolp(false), false},
		{"waiting", boolp(false), false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("container flags (-want +got):\n%s", diff)
	}
	// A container whose readiness is not known asks for a probe now.
	w, _ := m.getWorker(workerKey{pod.UID, "unprobed", Readiness})
	if len(w.trigger) != 1 {
		t.Error("readiness probe of an unprobed container not triggered")
	}
}

func TestUpdatePodStatusTriggersReadinessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		h.start = time.Now()

		pod := testPod("p1", nil, execProbe(func(p *v1.Probe) { p.PeriodSeconds = 10 }), nil)
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.setScript(Readiness, Failure, Success)
		h.m.AddPod(pod)
		settle(3 * time.Second)
		h.sync(pod) // readiness not Success: probe again now
		synctest.Wait()
		if diff := cmp.Diff(secs(0, 3), h.callTimes(Readiness)); diff != "" {
			t.Errorf("probe times (-want +got):\n%s", diff)
		}
		h.sync(pod)
		st, _ := h.status(pod.UID)
		if !st.ContainerStatuses[0].Ready {
			t.Error("container not ready after a successful readiness probe")
		}
	})
}

func TestRemovePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)

		p1 := testPod("p1", execProbe(nil), execProbe(nil), nil)
		p2 := testPod("p2", execProbe(nil), execProbe(nil), nil)
		for _, p := range []*v1.Pod{p1, p2} {
			h.setStatus(p, runningStatus("c-"+string(p.UID), time.Now(), true))
			h.m.AddPod(p)
			h.m.AddPod(p) // again: no second worker
		}
		settle(2 * time.Second)
		if got := h.m.workerCount(); got != 4 {
			t.Fatalf("workers = %d, want 4", got)
		}
		// Probes that hang until cancelled: RemovePod must not wait for them.
		h.mu.Lock()
		h.block = true
		h.mu.Unlock()
		settle(time.Second)
		start := time.Now()
		h.m.RemovePod(p1)
		synctest.Wait()
		if d := time.Since(start); d != 0 {
			t.Errorf("workers stopped after %v, want at once", d)
		}
		if got := h.m.workerCount(); got != 2 {
			t.Errorf("workers = %d, want 2", got)
		}
		if _, ok := h.m.readiness.get("c-p1"); ok {
			t.Error("readiness result of a removed pod kept")
		}
		if _, ok := h.m.readiness.get("c-p2"); !ok {
			t.Error("readiness result of another pod removed")
		}
		h.m.CleanupPods(map[types.UID]bool{"p1": true})
		synctest.Wait()
		if got := h.m.workerCount(); got != 0 {
			t.Errorf("workers after CleanupPods = %d, want 0", got)
		}
	})
}

func TestStopLivenessAndStartup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		pod := testPod("p1", execProbe(nil), execProbe(nil), execProbe(nil))
		h.setStatus(pod, runningStatus("c1", time.Now(), true))
		h.m.AddPod(pod)
		settle(time.Second)
		h.m.StopLivenessAndStartup(pod)
		synctest.Wait()
		for _, typ := range probeTypes {
			_, ok := h.m.getWorker(workerKey{pod.UID, "app", typ})
			if ok != (typ == Readiness) {
				t.Errorf("%s worker running: %v", typ, ok)
			}
		}
	})
}

func TestSidecarProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		stop := h.run()
		defer stop()
		settle(time.Minute)
		always := v1.ContainerRestartPolicyAlways
		pod := testPod("p1", nil, nil, nil)
		pod.Spec.InitContainers = []v1.Container{
			{Name: "init", ReadinessProbe: execProbe(nil)}, // not a sidecar: never probed
			{Name: "sidecar", RestartPolicy: &always, ReadinessProbe: execProbe(func(p *v1.Probe) { p.PeriodSeconds = 1 })},
		}
		st := runningStatus("c1", time.Now(), true)
		st.InitContainerStatuses = []v1.ContainerStatus{{
			Name: "sidecar", ContainerID: "fake://side", Started: boolp(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}}
		h.setStatus(pod, st)
		h.m.AddPod(pod)
		settle(500 * time.Millisecond)
		if got := h.m.workerCount(); got != 1 {
			t.Errorf("workers = %d, want 1 (the sidecar's)", got)
		}
		if r, ok := h.m.readiness.get("side"); !ok || r != Success {
			t.Errorf("sidecar readiness = %v, %v; want Success", r, ok)
		}
	})
}

func TestFullChannelDoesNotBlockRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewManager(func(types.UID) (v1.PodStatus, bool) { return runningStatus("c1", time.Now(), true), true }, Options{
			Prober: ProberFunc(func(context.Context, Request) (Result, string, error) { return Success, "", nil }),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		time.Sleep(time.Minute)
		// Nobody reads the channels: fill them.
		var pods []*v1.Pod
		for i := range 25 {
			p := testPod(types.UID("p"+strconv.Itoa(i)), nil, execProbe(nil), nil)
			pods = append(pods, p)
			m.AddPod(p)
		}
		synctest.Wait()
		if got := len(m.Readiness()); got != 20 {
			t.Fatalf("readiness channel holds %d updates, want 20", got)
		}
		for _, p := range pods {
			m.RemovePod(p)
		}
		synctest.Wait()
		if got := m.workerCount(); got != 0 {
			t.Errorf("workers = %d, want 0", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestManagerHTTP runs real HTTP readiness probes against a local server
// whose health the test switches, and checks that Run leaves no goroutine.
func TestManagerHTTP(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	var healthy atomic.Bool
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())

	pod := testPod("p1", nil, &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("web")}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}, nil)
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}
	st := runningStatus("c1", time.Now(), true)
	st.PodIP = u.Hostname()
	m, err := NewManager(func(types.UID) (v1.PodStatus, bool) { return st, true }, Options{
		Runtime: ExecerFunc(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	// Probes start after a random part of the first second.
	m.AddPod(pod)
	next := func() Update {
		select {
		case u := <-m.Readiness():
			return u
		case <-time.After(5 * time.Second):
			t.Fatal("no readiness update within 5s")
		}
		return Update{}
	}
	if u := next(); u.Result != Failure {
		t.Errorf("initial readiness = %v", u.Result)
	}
	healthy.Store(true)
	if diff := cmp.Diff(Update{ContainerID: "c1", Result: Success, PodUID: "p1"}, next()); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	healthy.Store(false)
	if u := next(); u.Result != Failure {
		t.Errorf("readiness after the server failed = %v", u.Result)
	}
	m.RemovePod(pod)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if hits.Load() < 2 {
		t.Errorf("server hit %d times", hits.Load())
	}
}

// TestManagerExecRuntimetest runs an exec liveness probe through the
// in-memory runtime: the command starts failing, the container is reported
// unhealthy.
func TestManagerExecRuntimetest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
		defer rt.Close()
		ctx := t.Context()
		sc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "p1"}}
		sid, _ := rt.RunPodSandbox(ctx, sc, "")
		id, _ := rt.CreateContainer(ctx, sid, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
			Command:  []string{"sleep", "infinity"},
		}, sc)
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		var healthy atomic.Bool
		healthy.Store(true)
		var mu sync.Mutex
		var cmds []string
		rt.SetExecHandler(func(_ string, cmd []string) ([]byte, []byte, int32) {
			mu.Lock()
			cmds = append(cmds, strings.Join(cmd, " "))
			mu.Unlock()
			if healthy.Load() {
				return nil, nil, 0
			}
			return nil, []byte("cat: /tmp/healthy: No such file or directory"), 1
		})

		pod := testPod("p1", &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 5, FailureThreshold: 2,
		}, nil, nil)
		m, err := NewManager(func(types.UID) (v1.PodStatus, bool) { return runningStatus(id, time.Now(), true), true }, Options{
			Runtime: rt,
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- m.Run(rctx) }()
		time.Sleep(time.Minute)
		m.AddPod(pod)
		time.Sleep(12 * time.Second)
		if got := m.Unhealthy(id); got != "" {
			t.Errorf("Unhealthy while the file exists = %q", got)
		}
		healthy.Store(false)
		time.Sleep(10 * time.Second)
		if got := m.Unhealthy(id); got != "liveness" {
			t.Errorf("Unhealthy after two failures = %q, want liveness", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(cmds) != 5 || cmds[0] != "cat /tmp/healthy" {
			t.Errorf("commands = %q, want 5 × cat /tmp/healthy", cmds)
		}
	})
}
