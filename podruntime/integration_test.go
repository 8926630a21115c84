package podruntime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	nkstatus "github.com/nodekit/nodekit/status"
)

func newPod(name string, policy v1.RestartPolicy) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: new(int64(30)),
		},
	}
}

func container(name, script string) v1.Container {
	return v1.Container{Name: name, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", script}}
}

// agent is a tiny pod worker: read the status, sync, once a second.
type agent struct {
	t   *testing.T
	m   *podruntime.Manager
	pod *v1.Pod
}

func (a *agent) tick() (podruntime.SyncResult, v1.PodStatus) {
	a.t.Helper()
	ctx := a.t.Context()
	st, err := a.m.GetPodStatus(ctx, a.pod.UID, a.pod.Name, a.pod.Namespace)
	if err != nil {
		a.t.Fatalf("GetPodStatus: %v", err)
	}
	res := a.m.SyncPod(ctx, a.pod, st)
	if err := res.Err(); err != nil && !res.OnlyBackOff() {
		a.t.Fatalf("SyncPod: %v", err)
	}
	st, err = a.m.GetPodStatus(ctx, a.pod.UID, a.pod.Name, a.pod.Namespace)
	if err != nil {
		a.t.Fatalf("GetPodStatus: %v", err)
	}
	return res, apiStatus(a.m, a.pod, st)
}

func newAgent(t *testing.T, rt *runtimetest.Runtime, pod *v1.Pod) *agent {
	m, err := podruntime.New(rt, rt, podruntime.Options{Logger: testr.New(t), PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &agent{t: t, m: m, pod: pod}
}

// TestLifecycleWithInMemoryRuntime runs a pod with an init container and a
// crashing app container on runtimetest, one sync a second, and follows
// its phases, restarts and back-off.
func TestLifecycleWithInMemoryRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		pod := newPod("life", v1.RestartPolicyAlways)
		pod.Spec.InitContainers = []v1.Container{container("setup", "sleep 1.5; exit 0")}
		pod.Spec.Containers = []v1.Container{container("app", "sleep 4.5; exit 1"), container("web", "sleep infinity")}
		a := newAgent(t, rt, pod)

		type sample struct {
			Second   int
			Phase    v1.PodPhase
			Init     string
			App      string
			Restarts int32
		}
		state := func(s v1.ContainerStatus) string {
			switch {
			case s.State.Running != nil:
				return "running"
			case s.State.Terminated != nil:
				return "terminated"
			}
			return s.State.Waiting.Reason
		}
		var got []sample
		for sec := 0; sec <= 40; sec++ {
			_, st := a.tick()
			got = append(got, sample{sec, st.Phase, state(st.InitContainerStatuses[0]), state(st.ContainerStatuses[0]), st.ContainerStatuses[0].RestartCount})
			time.Sleep(time.Second)
		}
		// Keep the seconds where something changed.
		var changes []sample
		for i, s := range got {
			if i == 0 || s.Phase != got[i-1].Phase || s.Init != got[i-1].Init || s.App != got[i-1].App || s.Restarts != got[i-1].Restarts {
				changes = append(changes, s)
			}
		}
		want := []sample{
			{0, v1.PodPending, "running", "PodInitializing", 0},
			{2, v1.PodRunning, "terminated", "running", 0},           // init done at 1.5s, app starts at the next sync
			{7, v1.PodRunning, "terminated", "running", 1},           // exits at 6.5s, restarted at once
			{12, v1.PodRunning, "terminated", "CrashLoopBackOff", 1}, // exits at 11.5s, back-off 10s
			{22, v1.PodRunning, "terminated", "running", 2},
			{27, v1.PodRunning, "terminated", "CrashLoopBackOff", 2}, // back-off 20s
		}
		if diff := cmp.Diff(want, changes); diff != "" {
			t.Errorf("lifecycle (-want +got):\n%s", diff)
		}

		// Deleting: KillPod stops everything; the pod then stays down.
		if err := a.m.KillPod(t.Context(), pod, nil, new(int64(0))); err != nil {
			t.Fatal(err)
		}
		for _, c := range rt.Containers() {
			if runtime.StateFromCRI(c.State) == runtime.ContainerStateRunning {
				t.Errorf("container %s still running after KillPod", c.Name)
			}
		}
		if err := a.m.RemovePod(t.Context(), pod.UID); err != nil {
			t.Fatal(err)
		}
		if n := len(rt.Containers()) + len(rt.Sandboxes()); n != 0 {
			t.Errorf("%d objects left after RemovePod", n)
		}
	})
}

// TestRunToCompletion runs a restartPolicy Never pod to Succeeded and checks
// that further syncs leave it alone.
func TestRunToCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		pod := newPod("job", v1.RestartPolicyNever)
		pod.Spec.Containers = []v1.Container{container("work", "sleep 3; exit 0")}
		a := newAgent(t, rt, pod)
		var phase v1.PodPhase
		for range 5 {
			_, st := a.tick()
			phase = st.Phase
			time.Sleep(time.Second)
		}
		if phase != v1.PodSucceeded {
			t.Fatalf("phase = %s, want Succeeded", phase)
		}
		creates, stops := rt.Calls("CreateContainer"), rt.Calls("StopPodSandbox")
		for range 3 {
			a.tick()
		}
		if rt.Calls("CreateContainer") != creates || rt.Calls("StopPodSandbox") != stops || rt.Calls("RunPodSandbox") != 1 {
			t.Errorf("a finished pod was touched again: creates %d->%d, sandbox stops %d->%d, sandboxes %d",
				creates, rt.Calls("CreateContainer"), stops, rt.Calls("StopPodSandbox"), rt.Calls("RunPodSandbox"))
		}
	})
}

func TestStatusWithInMemoryRuntime(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	m, err := podruntime.New(rt, rt, podruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Status(context.WithoutCancel(t.Context())); err != nil {
		t.Fatalf("Status = %v", err)
	}
	if m.RuntimeName() == "cri" {
		t.Errorf("runtime name not learned")
	}
}

// TestSidecarWithInMemoryRuntime runs a pod whose restartable init
// container (sidecar) keeps running beside the app container and is
// restarted when it dies.
func TestSidecarWithInMemoryRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
		defer rt.Close()
		pod := newPod("side", v1.RestartPolicyNever)
		always := v1.ContainerRestartPolicyAlways
		side := container("proxy", "sleep infinity")
		side.RestartPolicy = &always
		pod.Spec.InitContainers = []v1.Container{side, container("migrate", "sleep 1.5; exit 0")}
		pod.Spec.Containers = []v1.Container{container("app", "sleep infinity")}
		a := newAgent(t, rt, pod)
		var st v1.PodStatus
		for range 4 {
			_, st = a.tick()
			time.Sleep(time.Second)
		}
		if st.Phase != v1.PodRunning || st.InitContainerStatuses[0].State.Running == nil || st.ContainerStatuses[0].State.Running == nil {
			t.Fatalf("status = %s, sidecar %+v, app %+v", st.Phase, st.InitContainerStatuses[0].State, st.ContainerStatuses[0].State)
		}
		for _, c := range st.Conditions {
			if c.Type == v1.PodInitialized && c.Status != v1.ConditionTrue {
				t.Errorf("Initialized = %s %s", c.Status, c.Message)
			}
		}
		// The sidecar dies: it is restarted although the pod's policy is Never.
		for _, c := range rt.Containers() {
			if c.Name == "proxy" {
				if err := rt.ExitContainer(c.ID, 1, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, st = a.tick()
		if s := st.InitContainerStatuses[0]; s.State.Running == nil || s.RestartCount != 1 {
			t.Errorf("sidecar after its exit = %+v restarts %d", s.State, s.RestartCount)
		}
	})
}

// TestConcurrentPods syncs many pods at once on one Manager (run with -race).
func TestConcurrentPods(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			pod := newPod(fmt.Sprint("p", i), v1.RestartPolicyAlways)
			pod.Spec.Containers = []v1.Container{container("a", "sleep infinity"), container("b", "exit 1")}
			for range 3 {
				st, err := m.GetPodStatus(t.Context(), pod.UID, pod.Name, pod.Namespace)
				if err != nil {
					errs <- err
					return
				}
				if res := m.SyncPod(t.Context(), pod, st); res.Err() != nil && !res.OnlyBackOff() {
					errs <- res.Err()
					return
				}
				apiStatus(m, pod, st)
			}
			if err := m.KillPod(t.Context(), pod, nil, nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	pods, err := m.GetPods(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 0 {
		t.Errorf("%d pods still running after KillPod", len(pods))
	}
}

// BenchmarkSteadySync measures one pod worker iteration (GetPodStatus,
// SyncPod with nothing to do, status.Generate) for a pod of three running
// containers.
func BenchmarkSteadySync(b *testing.B) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	pod := newPod("bench", v1.RestartPolicyAlways)
	pod.Spec.Containers = []v1.Container{container("a", "sleep infinity"), container("b", "sleep infinity"), container("c", "sleep infinity")}
	ctx := b.Context()
	st, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err := m.SyncPod(ctx, pod, st).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			b.Fatal(err)
		}
		if res := m.SyncPod(ctx, pod, st); len(res.Results) != 0 {
			b.Fatalf("steady sync did something: %+v", res.Results)
		}
		apiStatus(m, pod, st)
	}
}

// BenchmarkStartPod measures creating a pod of three containers and
// removing it again.
func BenchmarkStartPod(b *testing.B) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	pod := newPod("bench", v1.RestartPolicyAlways)
	pod.Spec.Containers = []v1.Container{container("a", "sleep infinity"), container("b", "sleep infinity"), container("c", "sleep infinity")}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		st, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err := m.SyncPod(ctx, pod, st).Err(); err != nil {
			b.Fatal(err)
		}
		if err := m.KillPod(ctx, pod, nil, new(int64(0))); err != nil {
			b.Fatal(err)
		}
		if err := m.RemovePod(ctx, pod.UID); err != nil {
			b.Fatal(err)
		}
	}
}

// apiStatus is the pod's API status, as the agent derives it after a sync.
func apiStatus(m *podruntime.Manager, pod *v1.Pod, st *runtime.PodStatus) v1.PodStatus {
	return nkstatus.Generate(nkstatus.Input{Pod: pod, Runtime: st, RuntimeName: m.RuntimeName(), Waiting: m})
}

// TestContainerLogPath checks that ContainerLogPath is the log path the
// runtime reports for the containers the Manager created.
func TestContainerLogPath(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	defer rt.Close()
	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("logs", v1.RestartPolicyAlways)
	pod.Spec.Containers = []v1.Container{container("a", "sleep infinity"), container("b", "sleep infinity")}
	ctx := t.Context()
	st, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err := m.SyncPod(ctx, pod, st).Err(); err != nil {
		t.Fatal(err)
	}
	st, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ContainerStatuses) != 2 {
		t.Fatalf("%d containers, want 2", len(st.ContainerStatuses))
	}
	for _, cs := range st.ContainerStatuses {
		resp, err := rt.ContainerStatus(ctx, cs.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m.ContainerLogPath(st, cs), resp.GetStatus().GetLogPath(); got != want || want == "" {
			t.Errorf("container %s: ContainerLogPath %q, runtime's %q", cs.Name, got, want)
		}
	}
}
