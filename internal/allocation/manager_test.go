package allocation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/podmodel"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/syncloop"
)

func apiPodWithCPU(uid, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), Generation: 2,
			Annotations: map[string]string{podmodel.AnnotationSource: podmodel.APIServerSource}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
	}
}

func cpuOf(p *v1.Pod) string {
	q := p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]
	return q.String()
}

// TestResizesCheckpoint: an admitted pod is allocated what it was admitted
// with; a resize that fits is allocated, one that does not stays pending
// with the pod run as allocated; a restarted agent (a new allocation
// manager on the same checkpoint) admits and runs the pod with what it
// allocated, not what the spec asks for now.
func TestResizesCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), checkpointFile)
	var (
		mu     sync.Mutex
		active []*v1.Pod
	)
	newResizes := func() *Manager {
		return &Manager{
			path:  path,
			log:   testr.New(t),
			known: func(types.UID) bool { return true },
			active: func() []*v1.Pod {
				mu.Lock()
				defer mu.Unlock()
				return active
			},
			allocatable: func() v1.ResourceList {
				return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
			},
		}
	}
	r := newResizes()
	var admitted []string
	record := admission.Func(func(pod *v1.Pod, _ []*v1.Pod) admission.Result {
		admitted = append(admitted, cpuOf(pod))
		return admission.Result{Admit: true}
	})
	admit := r.Admit([]admission.Handler{record})
	pod := apiPodWithCPU("a", "1")
	if res := admit.Admit(pod, nil); !res.Admit {
		t.Fatalf("admission: %+v", res)
	}
	other := apiPodWithCPU("b", "2")
	mu.Lock()
	active = []*v1.Pod{pod, other}
	mu.Unlock()

	if got := r.resolve(apiPodWithCPU("a", "1500m")); cpuOf(got) != "1500m" || r.PendingResize("a") != nil {
		t.Errorf("a resize that fits: runs with %s, pending %v", cpuOf(got), r.PendingResize("a"))
	}
	got := r.resolve(apiPodWithCPU("a", "3"))
	if cpuOf(got) != "1500m" {
		t.Errorf("a deferred resize runs the pod with %s, want the allocated 1500m", cpuOf(got))
	}
	c := r.PendingResize("a")
	if c == nil || c.Reason != v1.PodReasonDeferred || c.Message != "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000" || c.ObservedGeneration != 2 {
		t.Errorf("PodResizePending = %+v", c)
	}

	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	restarted := newResizes()
	admitted = nil
	if res := restarted.Admit([]admission.Handler{record}).Admit(apiPodWithCPU("a", "3"), nil); !res.Admit || len(admitted) != 1 || admitted[0] != "1500m" {
		t.Errorf("after a restart the pod was admitted with %v, want the allocated 1500m", admitted)
	}
	if got, _ := restarted.allocated(apiPodWithCPU("a", "3")); cpuOf(got) != "1500m" {
		t.Errorf("after a restart the pod runs with %s, want 1500m", cpuOf(got))
	}

	// An unreadable checkpoint is logged and replaced, the pods allocated
	// as asked.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := newResizes()
	if got := broken.resolve(apiPodWithCPU("a", "3")); cpuOf(got) != "3" {
		t.Errorf("with a broken checkpoint the pod runs with %s, want its spec's 3", cpuOf(got))
	}
}

// resizeEnv is what an allocation manager sees of the agent: the pods it
// knows (all active), whether the sources are ready, the syncs asked for
// and the events.
type resizeEnv struct {
	mu       sync.Mutex
	pods     map[types.UID]*v1.Pod
	notReady bool
	synced   []string
	events   []string
	errs     map[types.UID]string
}

func (e *resizeEnv) set(pods ...*v1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range pods {
		e.pods[p.UID] = p
	}
}

func (e *resizeEnv) remove(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pods, uid)
}

func (e *resizeEnv) takeSynced() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.synced
	e.synced = nil
	return out
}

func (e *resizeEnv) takeEvents() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.events
	e.events = nil
	return out
}

func newEnvResizes(t *testing.T, e *resizeEnv) *Manager {
	e.pods = map[types.UID]*v1.Pod{}
	return &Manager{
		log:   testr.New(t),
		known: func(uid types.UID) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.pods[uid] != nil },
		active: func() []*v1.Pod {
			e.mu.Lock()
			defer e.mu.Unlock()
			var out []*v1.Pod
			for _, p := range e.pods {
				out = append(out, p)
			}
			return out
		},
		allocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
		},
		event: func(_ *v1.Pod, eventtype, reason, message string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, eventtype+" "+reason+" "+message)
		},
		podByUID: func(uid types.UID) (*v1.Pod, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			p, ok := e.pods[uid]
			return p, ok
		},
		sourcesReady: func() bool { e.mu.Lock(); defer e.mu.Unlock(); return !e.notReady },
		triggerSync: func(p *v1.Pod) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.synced = append(e.synced, p.Name)
		},
		resizeError: func(uid types.UID) (string, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			m, ok := e.errs[uid]
			return m, ok
		},
		kick: make(chan struct{}, 1),
	}
}

// admitAll admits the pods in order, allocating them what they ask.
func admitAll(t *testing.T, r *Manager, e *resizeEnv, pods ...*v1.Pod) {
	t.Helper()
	admit := r.Admit(nil)
	for _, p := range pods {
		if res := admit.Admit(p, nil); !res.Admit {
			t.Fatalf("admission of %s: %+v", p.Name, res)
		}
		e.set(p)
		r.resolve(p)
	}
}

// fakeHandler is a SyncHandler that does nothing.
type fakeHandler struct{ syncloop.SyncHandler }

func (fakeHandler) HandlePodAdditions(context.Context, []*v1.Pod) {}
func (fakeHandler) HandlePodUpdates(context.Context, []*v1.Pod)   {}
func (fakeHandler) HandlePodRemoves(context.Context, []*v1.Pod)   {}

// TestResizesRetryTriggers: a deferred resize is retried, as the
// kubelet's allocation manager does, when a pod is removed, when one
// terminates and when another pod's update asks for a resize: allocated
// as soon as the room is there, the pod synced at once, ResizeStarted
// with the kubelet's message.
func TestResizesRetryTriggers(t *testing.T) {
	for _, trigger := range []string{triggerPodsRemoved, triggerPodTerminated, triggerPodResized} {
		t.Run(trigger, func(t *testing.T) {
			e := &resizeEnv{}
			r := newEnvResizes(t, e)
			h := r.WrapHandler(fakeHandler{})
			a, b := apiPodWithCPU("a", "1"), apiPodWithCPU("b", "2")
			admitAll(t, r, e, a, b)

			want := apiPodWithCPU("a", "3")
			e.set(want)
			if got := r.resolve(want); cpuOf(got) != "1" {
				t.Fatalf("deferred resize runs the pod with %s, want 1", cpuOf(got))
			}
			if c := r.PendingResize("a"); c == nil || c.Reason != v1.PodReasonDeferred {
				t.Fatalf("PodResizePending = %+v, want Deferred", c)
			}
			wantDeferred := "Warning ResizeDeferred " + podmodel.ResizeEventMessage("Pod resize Deferred", want, 2,
				"Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000")
			if d := cmp.Diff([]string{wantDeferred}, e.takeEvents()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}

			switch trigger {
			case triggerPodsRemoved:
				e.remove("b")
				h.HandlePodRemoves(t.Context(), []*v1.Pod{b})
			case triggerPodTerminated:
				e.remove("b")
				sf := r.WrapSync(podworker.SyncFuncs(nil)).(resizingSyncFuncs)
				sf.SyncFuncs = terminatedOnly{}
				if err := sf.SyncTerminatedPod(t.Context(), b, nil); err != nil {
					t.Fatal(err)
				}
			case triggerPodResized:
				smaller := apiPodWithCPU("b", "1")
				e.set(smaller)
				h.HandlePodUpdates(t.Context(), []*v1.Pod{smaller})
			}
			synced := e.takeSynced()
			if !slices.Contains(synced, "a") {
				t.Errorf("synced %v, want a among them", synced)
			}
			if c := r.PendingResize("a"); c != nil {
				t.Errorf("PodResizePending = %+v after the retry", c)
			}
			if got, _ := r.allocated(want); cpuOf(got) != "3" {
				t.Errorf("after the retry the pod runs with %s, want 3", cpuOf(got))
			}
			started := "Normal ResizeStarted " + podmodel.ResizeEventMessage("Pod resize started", want, 2, "")
			if !slices.Contains(e.takeEvents(), started) {
				t.Errorf("no %q", started)
			}
		})
	}
}

// terminatedOnly is a pod sync whose SyncTerminatedPod succeeds.
type terminatedOnly struct{ podworker.SyncFuncs }

func (terminatedOnly) SyncTerminatedPod(context.Context, *v1.Pod, *runtime.PodStatus) error {
	return nil
}

// TestResizesRetryOrder: a retry decides the deferred Manager in the
// kubelet's order: one that asks for no more requests first, then the
// higher priority, then the Guaranteed pod, then the one pending longest.
func TestResizesRetryOrder(t *testing.T) {
	prio := func(p *v1.Pod, v int32) *v1.Pod { p.Spec.Priority = &v; return p }
	guaranteed := func(p *v1.Pod) *v1.Pod {
		c := &p.Spec.Containers[0].Resources
		c.Requests[v1.ResourceMemory] = resource.MustParse("1Gi")
		c.Limits = c.Requests.DeepCopy()
		return p
	}
	tests := []struct {
		name         string
		first, later func() (*v1.Pod, *v1.Pod) // as admitted, as resized
		wantWinner   string
	}{
		{
			name: "higher priority first",
			first: func() (*v1.Pod, *v1.Pod) {
				return prio(apiPodWithCPU("low", "500m"), 1), prio(apiPodWithCPU("low", "1500m"), 1)
			},
			later: func() (*v1.Pod, *v1.Pod) {
				return prio(apiPodWithCPU("high", "500m"), 10), prio(apiPodWithCPU("high", "1500m"), 10)
			},
			wantWinner: "high",
		},
		{
			name:  "Guaranteed first",
			first: func() (*v1.Pod, *v1.Pod) { return apiPodWithCPU("burst", "500m"), apiPodWithCPU("burst", "1500m") },
			later: func() (*v1.Pod, *v1.Pod) {
				return guaranteed(apiPodWithCPU("guar", "500m")), guaranteed(apiPodWithCPU("guar", "1500m"))
			},
			wantWinner: "guar",
		},
		{
			name:       "longest pending first",
			first:      func() (*v1.Pod, *v1.Pod) { return apiPodWithCPU("old", "500m"), apiPodWithCPU("old", "1500m") },
			later:      func() (*v1.Pod, *v1.Pod) { return apiPodWithCPU("new", "500m"), apiPodWithCPU("new", "1500m") },
			wantWinner: "old",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &resizeEnv{}
			r := newEnvResizes(t, e)
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			r.clock = clk
			big := apiPodWithCPU("big", "3")
			firstAdmitted, firstResized := tt.first()
			laterAdmitted, laterResized := tt.later()
			admitAll(t, r, e, big, firstAdmitted, laterAdmitted)
			// Both ask for one more cpu than the node has: deferred.
			e.set(firstResized)
			r.resolve(firstResized)
			clk.Step(time.Minute)
			e.set(laterResized)
			r.resolve(laterResized)
			if r.PendingResize(firstResized.UID) == nil || r.PendingResize(laterResized.UID) == nil {
				t.Fatal("the Manager were not deferred")
			}
			// The big pod shrinks to 2 cpu: room for one of them only.
			e.set(apiPodWithCPU("big", "2"))
			r.resolve(apiPodWithCPU("big", "2"))
			e.takeSynced()
			r.retryPending(triggerPeriodic)
			if d := cmp.Diff([]string{tt.wantWinner}, e.takeSynced()); d != "" {
				t.Errorf("synced (-want +got):\n%s", d)
			}
			if r.PendingResize(types.UID(tt.wantWinner)) != nil {
				t.Errorf("%s still pending", tt.wantWinner)
			}
		})
	}
}

// TestResizesPeriodicRetry: with no trigger, a deferred resize is retried
// initialRetryDelay after the start, then every retryDelay; not while the
// pod sources are not all ready (then again initialRetryDelay later). On
// Run's goroutine and as a task of a periodic.Driver (Config.Periodic).
func TestResizesPeriodicRetry(t *testing.T) {
	for _, driver := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", driver), func(t *testing.T) { testResizesPeriodicRetry(t, driver) })
	}
}

func testResizesPeriodicRetry(t *testing.T, driver bool) {
	synctest.Test(t, func(t *testing.T) {
		e := &resizeEnv{}
		r := newEnvResizes(t, e)
		if driver {
			r.periodic = periodictest.Start(t)
		}
		a, b := apiPodWithCPU("a", "1"), apiPodWithCPU("b", "2")
		admitAll(t, r, e, a, b)
		e.set(apiPodWithCPU("a", "3"))
		r.resolve(apiPodWithCPU("a", "3"))
		e.mu.Lock()
		e.notReady = true
		e.mu.Unlock()
		e.remove("b") // room made without a trigger

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}()
		time.Sleep(initialRetryDelay - time.Second)
		synctest.Wait()
		if s := e.takeSynced(); len(s) != 0 || r.PendingResize("a") == nil {
			t.Fatalf("retried before initialRetryDelay: synced %v", s)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := e.takeSynced(); len(s) != 0 || r.PendingResize("a") == nil {
			t.Fatalf("retried with the sources not ready: synced %v", s)
		}
		e.mu.Lock()
		e.notReady = false
		e.mu.Unlock()
		time.Sleep(initialRetryDelay)
		synctest.Wait()
		if d := cmp.Diff([]string{"a"}, e.takeSynced()); d != "" || r.PendingResize("a") != nil {
			t.Fatalf("synced at the second retry (-want +got):\n%s", d)
		}

		// The next periodic retry is retryDelay later.
		e.set(apiPodWithCPU("c", "1"))
		admitAll(t, r, e, apiPodWithCPU("c", "1"))
		e.set(apiPodWithCPU("c", "3"))
		r.resolve(apiPodWithCPU("c", "3"))
		e.remove("a")
		time.Sleep(retryDelay - time.Second)
		synctest.Wait()
		if s := e.takeSynced(); len(s) != 0 {
			t.Fatalf("retried before retryDelay: synced %v", s)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if d := cmp.Diff([]string{"c"}, e.takeSynced()); d != "" {
			t.Errorf("synced at retryDelay (-want +got):\n%s", d)
		}
	})
}

// TestResizesCompletedAndError: ResizeCompleted once the runtime reports
// the allocated resources (not when UpdateContainerResources returned),
// with the generation the resize was allocated at; ResizeError once per
// new error message of a failed resize in place.
func TestResizesCompletedAndError(t *testing.T) {
	e := &resizeEnv{errs: map[types.UID]string{}}
	r := newEnvResizes(t, e)
	pod := apiPodWithCPU("a", "1")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	admitAll(t, r, e, pod)
	resized := pod.DeepCopy()
	resized.Generation = 3
	resized.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
	}
	e.set(resized)
	allocated := r.resolve(resized)
	e.takeEvents()
	at := func(cpu string) *runtime.PodStatus {
		q := resource.MustParse(cpu)
		return &runtime.PodStatus{
			SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
			ContainerStatuses: []*runtime.ContainerStatus{{
				Name: "c", State: runtime.ContainerStateRunning, SandboxID: "sb",
				Resources: &runtime.ContainerResources{CPURequest: &q, CPULimit: &q},
			}}}
	}
	r.observe(allocated, at("1"))
	e.errs["a"] = "refused"
	r.observeError(allocated)
	r.observeError(allocated) // same error: no second event
	wantErr := "Warning ResizeError " + podmodel.ResizeEventMessage("Pod resize error", allocated, 3, "refused")
	if d := cmp.Diff([]string{wantErr}, e.takeEvents()); d != "" {
		t.Errorf("events of a failed resize (-want +got):\n%s", d)
	}
	delete(e.errs, "a")
	r.observeError(allocated)
	r.observe(allocated, at("1")) // updated, the runtime not reporting it yet
	if ev := e.takeEvents(); len(ev) != 0 {
		t.Errorf("events before the runtime reports the resize: %v", ev)
	}
	r.observe(allocated, at("2"))
	r.observe(allocated, at("2"))
	wantDone := "Normal ResizeCompleted " + podmodel.ResizeEventMessage("Pod resize completed", allocated, 3, "")
	if d := cmp.Diff([]string{wantDone}, e.takeEvents()); d != "" {
		t.Errorf("events of a completed resize (-want +got):\n%s", d)
	}
}

// syncOnly is a pod sync whose SyncPod calls do.
type syncOnly struct {
	podworker.SyncFuncs
	do func(pod *v1.Pod)
}

func (s syncOnly) SyncPod(_ context.Context, _ podworker.UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
	s.do(pod)
	return false, nil
}

// TestResizesCompletedInTheSync: a sync that actuates a resize, and reads
// the runtime's status after its work, completes the resize at once
// (ResizeCompleted), not at the next sync.
func TestResizesCompletedInTheSync(t *testing.T) {
	e := &resizeEnv{}
	r := newEnvResizes(t, e)
	pod := apiPodWithCPU("a", "1")
	admitAll(t, r, e, pod)
	running := func(cpu string) *runtime.PodStatus {
		q := resource.MustParse(cpu)
		return &runtime.PodStatus{
			SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
			ContainerStatuses: []*runtime.ContainerStatus{{
				Name: "c", State: runtime.ContainerStateRunning, SandboxID: "sb",
				Resources: &runtime.ContainerResources{CPURequest: &q},
			}},
		}
	}
	var (
		mu    sync.Mutex
		cache = running("1")
	)
	r.cached = func(types.UID) *runtime.PodStatus { mu.Lock(); defer mu.Unlock(); return cache }
	sf := r.WrapSync(syncOnly{do: func(p *v1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		cache = running(cpuOf(p)) // the runtime took the allocated cpu
	}})
	resized := apiPodWithCPU("a", "2")
	e.set(resized)
	if _, err := sf.SyncPod(t.Context(), podworker.SyncPodUpdate, resized, running("1")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Normal ResizeStarted " + podmodel.ResizeEventMessage("Pod resize started", resized, 2, ""),
		"Normal ResizeCompleted " + podmodel.ResizeEventMessage("Pod resize completed", resized, 2, ""),
	}
	if d := cmp.Diff(want, e.takeEvents()); d != "" {
		t.Errorf("events of one sync (-want +got):\n%s", d)
	}
}

// TestResizesPodLevel: a resize of the pod-level resources is allocated
// (ResizeStarted) and kept in the checkpoint, so that a restarted agent
// runs the pod with them; it is in progress while the pod cgroup lags the
// allocation, even with every container as allocated, and completed
// (ResizeCompleted) once the cgroup has it.
func TestResizesPodLevel(t *testing.T) {
	e := &resizeEnv{}
	r := newEnvResizes(t, e)
	r.path = filepath.Join(t.TempDir(), checkpointFile)
	podLevel := func(cpu string) *v1.Pod {
		p := apiPodWithCPU("a", "500m")
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}
		return p
	}
	admitAll(t, r, e, podLevel("1"))
	resized := podLevel("2")
	resized.Generation = 3
	e.set(resized)
	allocated := r.resolve(resized)
	if q := allocated.Spec.Resources.Requests[v1.ResourceCPU]; q.String() != "2" {
		t.Fatalf("pod-level cpu as allocated %s, want 2", q.String())
	}
	wantStarted := "Normal ResizeStarted " + podmodel.ResizeEventMessage("Pod resize started", resized, 3, "")
	if d := cmp.Diff([]string{wantStarted}, e.takeEvents()); d != "" {
		t.Errorf("events of the allocation (-want +got):\n%s", d)
	}

	restarted := newEnvResizes(t, &resizeEnv{})
	restarted.path = r.path
	if got, _ := restarted.allocated(podLevel("1")); got.Spec.Resources.Requests.Cpu().String() != "2" {
		t.Errorf("after a restart the pod-level cpu is %s, want the allocated 2", got.Spec.Resources.Requests.Cpu().String())
	}

	shares := func(v uint64) runtime.PodCgroupConfig { return runtime.PodCgroupConfig{CPUShares: &v} }
	cgroupShares := uint64(1024)
	r.podCgroup = func(*v1.Pod) *status.PodCgroupState {
		return &status.PodCgroupState{Current: shares(cgroupShares), Desired: shares(2048)}
	}
	ps := &runtime.PodStatus{
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		ContainerStatuses: []*runtime.ContainerStatus{{
			Name: "c", State: runtime.ContainerStateRunning, SandboxID: "sb",
			Resources: &runtime.ContainerResources{CPURequest: resource.NewMilliQuantity(500, resource.DecimalSI)},
		}}}
	r.observe(allocated, ps)
	if ev := e.takeEvents(); len(ev) != 0 {
		t.Errorf("events while the pod cgroup lags: %v", ev)
	}
	cgroupShares = 2048
	r.observe(allocated, ps)
	wantDone := "Normal ResizeCompleted " + podmodel.ResizeEventMessage("Pod resize completed", allocated, 3, "")
	if d := cmp.Diff([]string{wantDone}, e.takeEvents()); d != "" {
		t.Errorf("events once the pod cgroup has the resize (-want +got):\n%s", d)
	}
}

// TestAdmitMapsOnlyNewPods: admitting pods one at a time maps each active
// pod to its allocated form once, not at every admission (O(n) for n
// pods, not O(n²)); a changed allocation maps them again.
func TestAdmitMapsOnlyNewPods(t *testing.T) {
	r := &Manager{log: testr.New(t), known: func(types.UID) bool { return true }}
	var seen []int
	admit := r.Admit([]admission.Handler{admission.Func(func(_ *v1.Pod, active []*v1.Pod) admission.Result {
		seen = append(seen, len(active))
		return admission.Result{Admit: true}
	})})
	var active []*v1.Pod
	for i := range 50 {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("u", i))}}
		if res := admit.Admit(p, active); !res.Admit {
			t.Fatalf("pod %d refused: %+v", i, res)
		}
		active = append(active, p)
	}
	r.admitMu.Lock()
	kept := len(r.admitIn)
	r.admitMu.Unlock()
	if kept != 49 {
		t.Errorf("%d pods kept as allocated, want 49 (the active pods of the last admission)", kept)
	}
	if len(seen) != 50 || seen[49] != 49 {
		t.Errorf("the checks saw %d admissions, the last with %v active pods; want 50 and 49", len(seen), seen[len(seen)-1])
	}
	// A changed allocation of an admitted pod maps every pod again.
	r.mu.Lock()
	r.setAllocLocked(active[3].UID, podmodel.Allocation{})
	r.mu.Unlock()
	before := r.admitOut
	r.allocatedAll(active)
	if len(before) > 0 && len(r.admitOut) > 0 && &before[0] == &r.admitOut[0] {
		t.Error("the kept pods were reused after an allocation changed")
	}
	out := r.allocatedAll(active)
	for i, p := range out {
		if p.UID != active[i].UID {
			t.Fatalf("allocated pod %d is %s, want %s", i, p.UID, active[i].UID)
		}
	}
}

// TestHousekeepingForgetsGonePods: once a pod is gone from the agent
// (housekeeping, with no admission after it), the allocation manager holds
// nothing of it: its allocation (also gone from the checkpoint), the pod
// as allocated, and the last admission's pods.
func TestHousekeepingForgetsGonePods(t *testing.T) {
	path := filepath.Join(t.TempDir(), checkpointFile)
	var mu sync.Mutex
	known := map[types.UID]bool{}
	r := &Manager{path: path, log: testr.New(t), known: func(uid types.UID) bool {
		mu.Lock()
		defer mu.Unlock()
		return known[uid]
	}}
	admit := r.Admit(nil)
	var active []*v1.Pod
	for i := range 20 {
		p := apiPodWithCPU(fmt.Sprint("p", i), "100m")
		mu.Lock()
		known[p.UID] = true
		mu.Unlock()
		if res := admit.Admit(p, active); !res.Admit {
			t.Fatalf("pod %d refused: %+v", i, res)
		}
		active = append(active, p)
		r.allocated(p) // as its sync does
	}
	h := r.WrapHandler(nopHandler{})
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	n := len(r.alloc)
	r.mu.Unlock()
	if n != 20 {
		t.Fatalf("%d allocations with every pod known, want 20", n)
	}

	mu.Lock()
	clear(known)
	mu.Unlock()
	if err := h.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	alloc, asAllocated := len(r.alloc), len(r.asAllocated)
	r.mu.Unlock()
	r.admitMu.Lock()
	admitted := len(r.admitIn) + len(r.admitOut)
	r.admitMu.Unlock()
	if alloc+asAllocated+admitted != 0 {
		t.Errorf("after the pods are gone: %d allocations, %d pods as allocated, %d pods of the last admission; want none", alloc, asAllocated, admitted)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"version":1,"pods":{}}` {
		t.Errorf("checkpoint %s, want no pod", data)
	}
}

// nopHandler is a syncloop.SyncHandler that does nothing.
type nopHandler struct{ syncloop.SyncHandler }

func (nopHandler) HandlePodCleanups(context.Context) error { return nil }
