package nodekit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/cgroup"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podruntime"
	"github.com/nodekit/nodekit/podworker"
	"github.com/nodekit/nodekit/probe"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/volume"
)

// countingWorkers are pod workers that count the questions asked of
// them; ended are the pods known terminated.
type countingWorkers struct {
	mu           sync.Mutex
	ends         uint64
	ended        map[types.UID]bool
	terminatedQs int
	syncKnown    int
	noCounter    bool
}

func (w *countingWorkers) UpdatePod(podworker.UpdateOptions)        {}
func (w *countingWorkers) IsPodTerminationRequested(types.UID) bool { return false }
func (w *countingWorkers) IsPodKnownTerminated(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.terminatedQs++
	return w.ended[uid]
}

func (w *countingWorkers) SyncKnownPods([]*v1.Pod) map[types.UID]podworker.PodWorkerSync {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncKnown++
	return nil
}

func (w *countingWorkers) Terminations() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ends
}

func (w *countingWorkers) end(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended == nil {
		w.ended = map[types.UID]bool{}
	}
	w.ended[uid] = true
	w.ends++
}

// uncountedWorkers hide the Terminations of countingWorkers.
type uncountedWorkers struct{ PodWorkers }

// countingRuntime lists no runtime pods and counts the lists; its
// changes are set by the test.
type countingRuntime struct {
	lists   int
	count   uint64
	current bool
	err     error
}

func (r *countingRuntime) GetPods(context.Context, bool) ([]*runtime.Pod, error) {
	r.lists++
	return nil, r.err
}
func (r *countingRuntime) RemovePod(context.Context, types.UID) error { return nil }
func (r *countingRuntime) Forget(types.UID)                           {}
func (r *countingRuntime) changes() (uint64, bool)                    { return r.count, r.current }

type nopStatuses struct{}

func (nopStatuses) SetPodStatus(*v1.Pod, v1.PodStatus) bool                 { return true }
func (nopStatuses) GetPodStatus(types.UID) (v1.PodStatus, bool)             { return v1.PodStatus{}, false }
func (nopStatuses) PodTerminated(types.UID)                                 {}
func (nopStatuses) RemoveOrphans(map[types.UID]bool)                        {}
func (nopVolumes) AddPod(*v1.Pod)                                           {}
func (nopVolumes) CleanupOrphans(context.Context, map[types.UID]bool) error { return nil }
func (nopProbes) AddPod(*v1.Pod)                                            {}
func (nopProbes) RemovePod(*v1.Pod)                                         {}
func (nopProbes) CleanupPods(map[types.UID]bool)                            {}
func (nopCgroups) Enabled() bool                                            { return false }
func (nopCgroups) UpdateQoS([]*v1.Pod) error                                { return nil }
func (nopCgroups) Pods() ([]types.UID, error)                               { return nil, nil }
func (nopCgroups) DestroyPod(context.Context, types.UID) error              { return nil }
func (nopCache) Delete(types.UID)                                           {}

type (
	nopVolumes struct{}
	nopProbes  struct{}
	nopCgroups struct{}
	nopCache   struct{}
)

func newCountingHandler(t *testing.T, w PodWorkers, rt RuntimePods, admit ...admission.Handler) *Handler {
	t.Helper()
	h, err := NewHandler(HandlerConfig{
		Pods: NewPodManager(), Workers: w, Statuses: nopStatuses{}, Volumes: nopVolumes{},
		Probes: nopProbes{}, Cgroups: nopCgroups{}, Runtime: rt, Cache: nopCache{}, Admit: admit,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func idlePod(i int) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i)),
	}}
}

// TestHousekeepingSkipsUnchangedPasses: a housekeeping pass runs in full
// only when the pods, the workers' terminations or the runtime's pods
// changed since the last pass that succeeded, after a failed pass, and
// every fullCleanupPeriod; otherwise it lists nothing.
func TestHousekeepingSkipsUnchangedPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := &countingWorkers{}
		rt := &countingRuntime{current: true}
		h := newCountingHandler(t, w, rt)
		passes := func() int { return rt.lists }
		step := func(name string, want int) {
			t.Helper()
			err := h.HandlePodCleanups(ctx)
			if rt.err == nil && err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := passes(); got != want {
				t.Fatalf("%s: %d full passes, want %d", name, got, want)
			}
			time.Sleep(2 * time.Second)
		}
		step("first pass", 1)
		step("nothing changed", 1)
		step("nothing changed again", 1)

		h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(1)})
		step("pod added", 2)
		step("nothing changed after the addition", 2)

		w.end("uid-1")
		step("worker ended", 3)
		step("nothing changed after the end", 3)

		rt.count++
		step("runtime pods changed", 4)
		step("nothing changed after the runtime", 4)

		h.HandlePodRemoves(ctx, []*v1.Pod{idlePod(1)})
		step("pod removed", 5)
		step("nothing changed after the removal", 5)

		rt.count++
		rt.err = errors.New("runtime down")
		step("failing pass", 6)
		rt.err = nil
		step("pass after a failed one", 7)
		step("nothing changed after the recovery", 7)

		rt.current = false
		step("runtime pods not from a current cache", 8)
		step("still not current", 9)
		rt.current = true
		step("current again", 10)
		step("nothing changed once current", 10)

		// The passes so far took 2 s each; the full pass comes within
		// fullCleanupPeriod of the last one.
		n := passes()
		for range int(fullCleanupPeriod/(2*time.Second)) + 1 {
			if err := h.HandlePodCleanups(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
		}
		if got := passes() - n; got != 1 {
			t.Fatalf("%d full passes over %v with nothing changed, want 1", got, fullCleanupPeriod)
		}
	})
}

// TestHousekeepingRunsEveryPassWithoutCounts: parts that cannot count
// their changes (a user's pod workers) get every pass in full, as the
// kubelet's.
func TestHousekeepingRunsEveryPassWithoutCounts(t *testing.T) {
	rt := &countingRuntime{current: true}
	h := newCountingHandler(t, uncountedWorkers{&countingWorkers{}}, rt)
	for range 3 {
		if err := h.HandlePodCleanups(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if rt.lists != 3 {
		t.Fatalf("%d full passes, want 3", rt.lists)
	}
}

// TestAdmissionKeepsActivePods: pods added one at a time are admitted
// against every active pod, without the active pods being listed again
// for each (the API server's source adds one pod per update); a removal,
// a pod that terminated and an update are all seen by the next admission.
func TestAdmissionKeepsActivePods(t *testing.T) {
	ctx := t.Context()
	w := &countingWorkers{}
	var seen []types.UID
	record := admission.Func(func(_ *v1.Pod, active []*v1.Pod) admission.Result {
		seen = seen[:0]
		for _, p := range active {
			seen = append(seen, p.UID)
		}
		return admission.Result{Admit: true}
	})
	h := newCountingHandler(t, w, &countingRuntime{current: true}, record)
	const n = 200
	for i := range n {
		h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(i)})
	}
	if len(seen) != n-1 {
		t.Fatalf("the last pod was admitted against %d active pods, want %d", len(seen), n-1)
	}
	// The first batch lists the (no) active pods; the others reuse them.
	if w.terminatedQs != 0 {
		t.Fatalf("%d questions to the workers over %d single-pod batches, want 0", w.terminatedQs, n)
	}

	h.HandlePodRemoves(ctx, []*v1.Pod{idlePod(0)})
	w.end("uid-1")
	updated := idlePod(2)
	updated.Labels = map[string]string{"updated": "yes"}
	h.HandlePodUpdates(ctx, []*v1.Pod{updated})
	var got *v1.Pod
	h.c.Admit = append(h.c.Admit, admission.Func(func(_ *v1.Pod, active []*v1.Pod) admission.Result {
		for _, p := range active {
			if p.UID == updated.UID {
				got = p
			}
		}
		return admission.Result{Admit: true}
	}))
	h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(n)})
	if slices.Contains(seen, "uid-0") || slices.Contains(seen, "uid-1") || len(seen) != n-2 {
		t.Fatalf("after a removal and a termination, admitted against %d pods (uid-0 %v, uid-1 %v), want %d without them",
			len(seen), slices.Contains(seen, "uid-0"), slices.Contains(seen, "uid-1"), n-2)
	}
	if got != updated {
		t.Fatalf("admission saw the pod before its update")
	}

	// An update alone keeps the active pods and replaces the pod in them.
	qs := w.terminatedQs
	again := idlePod(3)
	again.Labels = map[string]string{"updated": "again"}
	h.HandlePodUpdates(ctx, []*v1.Pod{again})
	h.HandlePodReconcile(ctx, []*v1.Pod{idlePod(4)})
	h.HandlePodAdditions(ctx, []*v1.Pod{idlePod(n + 1)})
	if w.terminatedQs != qs {
		t.Fatalf("an update made the next admission list the active pods again")
	}
	if len(seen) != n-1 {
		t.Fatalf("admitted against %d pods, want %d", len(seen), n-1)
	}
}

// TestCachedContainers: the running containers come from the PLEG's
// cache while it is current, and every other list from the runtime.
func TestCachedContainers(t *testing.T) {
	rt := runtimetest.New(runtimetest.Options{})
	defer rt.Close()
	cache := pleg.NewCache()
	c := cachedContainers{RuntimeService: rt, cache: cache}
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	list := func(f *runtimeapi.ContainerFilter) []string {
		t.Helper()
		cs, err := c.ListContainers(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range cs {
			ids = append(ids, x.GetId())
		}
		return ids
	}
	if got := list(running); len(got) != 0 {
		t.Fatalf("from the (empty) runtime: %v", got)
	}
	cache.Set("a", &runtime.PodStatus{ID: "a", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "cached", Name: "app", State: runtime.ContainerStateRunning},
	}}, nil, time.Now())
	if got := list(running); len(got) != 0 {
		t.Fatalf("a cache never refreshed answered: %v", got)
	}
	if _, ok := c.RunningContainersChanges(); ok {
		t.Error("a cache never refreshed told its count of changes")
	}
	cache.UpdateTime(time.Now())
	if got := list(running); !slices.Equal(got, []string{"cached"}) {
		t.Fatalf("from a current cache: %v, want [cached]", got)
	}
	n0, ok := c.RunningContainersChanges()
	if !ok {
		t.Error("a current cache did not tell its count of changes")
	}
	cache.Set("a", &runtime.PodStatus{ID: "a", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "cached", Name: "app", State: runtime.ContainerStateRunning},
	}}, nil, time.Now())
	if n1, _ := c.RunningContainersChanges(); n1 == n0 {
		t.Error("the count of changes did not move when a pod's status was set")
	}
	for _, f := range []*runtimeapi.ContainerFilter{nil, {}, {State: running.State, PodSandboxId: "s"}, {State: running.State, Id: "x"},
		{State: running.State, LabelSelector: map[string]string{"a": "b"}}, {State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}}} {
		if got := list(f); len(got) != 0 {
			t.Fatalf("filter %v answered from the cache: %v", f, got)
		}
	}
	if c.Unwrap() != runtime.RuntimeService(rt) {
		t.Fatal("Unwrap does not give the runtime")
	}
}

// countingRuntime counts the pod syncs that reach the runtime manager.
type countingPodRuntime struct {
	*podruntime.Manager
	mu    sync.Mutex
	syncs int
	// during, when set, runs inside each sync.
	during func()
}

func (r *countingPodRuntime) SyncPodWithOptions(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, opts podruntime.SyncPodOptions) podruntime.SyncResult {
	r.mu.Lock()
	r.syncs++
	during := r.during
	r.mu.Unlock()
	if during != nil {
		during()
	}
	return r.Manager.SyncPodWithOptions(ctx, pod, st, opts)
}

func (r *countingPodRuntime) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncs
}

// TestPeriodicSyncSkippedWhenSettled: a periodic sync of a pod whose
// last sync found nothing to do is skipped while its inputs are the same;
// a change of its spec, runtime status or API status, an update, an
// active deadline and the full resync bound each make it sync in full.
// countedProbes are a pod's probe results whose change count the test
// moves.
type countedProbes struct {
	PodProbes
	n atomic.Uint64
}

func (p *countedProbes) Changes() uint64 { return p.n.Load() }

// settleFixture is a PodSyncer over the in-memory runtime with one pod,
// for the tests of skipped periodic syncs; run inside a synctest bubble.
type settleFixture struct {
	s      *PodSyncer
	crt    *countingPodRuntime
	probes *countedProbes
	pod    *v1.Pod
	read   func() *runtime.PodStatus
	sync   func(what string, ut podworker.UpdateType, p *v1.Pod, st *runtime.PodStatus, want int)
}

func newSettleFixture(t *testing.T) (*settleFixture, func()) {
	ctx := t.Context()
	dir := t.TempDir()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox:1.36"}})
	rm, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: filepath.Join(dir, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	crt := &countingPodRuntime{Manager: rm}
	statuses := status.NewManager(status.Options{})
	volumes, err := volume.NewManager(volume.Options{RootDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	probes, err := probe.NewManager(probe.Options{Runtime: rt, Statuses: statuses.GetPodStatus})
	if err != nil {
		t.Fatal(err)
	}
	cgroups, err := cgroup.NewPodManager(cgroup.PodManagerOptions{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	counted := &countedProbes{PodProbes: probes}
	s, err := NewPodSyncer(PodSyncerConfig{
		Runtime: crt, Volumes: volumes, Cgroups: cgroups, Probes: counted,
		Statuses: statuses, Cache: pleg.NewCache(), Queue: podworker.NewQueue(),
	})
	if err != nil {
		t.Fatal(err)
	}
	vctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = volumes.Run(vctx); close(done) }()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"},
		}}},
	}
	sources.SetDefaults(pod)
	volumes.AddPod(pod)
	read := func() *runtime.PodStatus {
		t.Helper()
		st, err := rm.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sync := func(what string, ut podworker.UpdateType, p *v1.Pod, st *runtime.PodStatus, want int) {
		t.Helper()
		if _, err := s.SyncPod(ctx, ut, p, st); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := crt.count(); got != want {
			t.Fatalf("%s: %d syncs reached the runtime, want %d", what, got, want)
		}
	}
	return &settleFixture{s: s, crt: crt, probes: counted, pod: pod, read: read, sync: sync}, func() { stop(); <-done; rt.Close() }
}

func TestPeriodicSyncSkippedWhenSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f, cleanup := newSettleFixture(t)
		defer cleanup()
		s, statuses, pod, read, sync := f.s, f.s.c.Statuses.(*status.Manager), f.pod, f.read, f.sync
		sync("create", podworker.SyncPodCreate, pod, read(), 1)
		st := read()
		sync("first sync of the running pod", podworker.SyncPodSync, pod, st, 2)
		sync("periodic sync, nothing changed", podworker.SyncPodSync, pod, st, 2)
		sync("again", podworker.SyncPodSync, pod, st, 2)
		sync("an update", podworker.SyncPodUpdate, pod, st, 3)
		sync("periodic sync after the update", podworker.SyncPodSync, pod, st, 3)

		st = read()
		sync("new runtime status", podworker.SyncPodSync, pod, st, 4)
		sync("settled on it", podworker.SyncPodSync, pod, st, 4)

		edited := pod.DeepCopy()
		edited.Labels = map[string]string{"a": "b"}
		sync("new pod object", podworker.SyncPodSync, edited, st, 5)
		sync("settled on it", podworker.SyncPodSync, edited, st, 5)
		pod = edited

		cur, _ := statuses.GetPodStatus(pod.UID)
		cur.Message = "changed elsewhere"
		statuses.SetPodStatus(pod, cur)
		sync("API status changed", podworker.SyncPodSync, pod, st, 6)
		sync("settled on it", podworker.SyncPodSync, pod, st, 6)

		time.Sleep(fullResyncPeriod)
		sync("full resync bound passed", podworker.SyncPodSync, pod, st, 7)
		sync("settled again", podworker.SyncPodSync, pod, st, 7)

		deadline := pod.DeepCopy()
		deadline.Spec.ActiveDeadlineSeconds = ptrTo(int64(3600))
		sync("pod with a deadline", podworker.SyncPodSync, deadline, st, 8)
		sync("pod with a deadline, nothing changed", podworker.SyncPodSync, deadline, st, 9)

		if err := s.SyncTerminatingPod(ctx, pod, st, 0, nil); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		n := len(s.settled)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d pods settled after the pod terminated, want 0", n)
		}
	})
}

// TestProbeChangeDuringSyncNotLost: a probe result that changes while a
// sync of the pod runs (after the sync read the results) makes the next
// periodic sync run in full, not skip as settled.
func TestProbeChangeDuringSyncNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cleanup := newSettleFixture(t)
		defer cleanup()
		f.sync("create", podworker.SyncPodCreate, f.pod, f.read(), 1)
		st := f.read()
		f.sync("first sync of the running pod", podworker.SyncPodSync, f.pod, st, 2)
		f.sync("periodic sync, nothing changed", podworker.SyncPodSync, f.pod, st, 2)

		f.crt.mu.Lock()
		f.crt.during = func() { f.probes.n.Add(1) }
		f.crt.mu.Unlock()
		f.sync("an update, during which a probe result changes", podworker.SyncPodUpdate, f.pod, st, 3)
		f.crt.mu.Lock()
		f.crt.during = nil
		f.crt.mu.Unlock()
		f.sync("the sync the probe change asked for", podworker.SyncPodSync, f.pod, st, 4)
		f.sync("settled on it", podworker.SyncPodSync, f.pod, st, 4)
	})
}

func ptrTo[T any](v T) *T { return &v }

// TestRunningLogPaths checks the log paths the log rotator gets from the
// agent: those of the running containers in the PLEG's cache, laid out as
// the runtime manager lays them out, for pods whose log directory is
// there, and none from a cache that is not current.
func TestRunningLogPaths(t *testing.T) {
	logs := t.TempDir()
	rt := runtimetest.New(runtimetest.Options{})
	t.Cleanup(rt.Close)
	m, err := podruntime.New(rt, rt, podruntime.Options{PodLogsDir: logs})
	if err != nil {
		t.Fatal(err)
	}
	cache := pleg.NewCache()
	cc := cachedContainers{RuntimeService: rt, cache: cache, logPath: m.ContainerLogPath, podLogDir: m.PodLogDir}
	if paths, ok := cc.RunningLogPaths(); ok {
		t.Errorf("a cache never refreshed gave %v", paths)
	}
	now := time.Now()
	cache.Set("u1", &runtime.PodStatus{ID: "u1", Name: "p1", Namespace: "ns", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c1", Name: "app", State: runtime.ContainerStateRunning, RestartCount: 2},
		{ID: "c0", Name: "init", State: runtime.ContainerStateExited},
	}}, nil, now)
	cache.Set("u2", &runtime.PodStatus{ID: "u2", Name: "p2", Namespace: "ns", ContainerStatuses: []*runtime.ContainerStatus{
		{ID: "c2", Name: "app", State: runtime.ContainerStateRunning},
	}}, nil, now)
	cache.UpdateTime(now)
	// Only p1's log directory is there.
	if err := os.MkdirAll(runtime.PodLogsDirectory(logs, "ns", "p1", "u1"), 0o755); err != nil {
		t.Fatal(err)
	}
	paths, ok := cc.RunningLogPaths()
	if !ok {
		t.Fatal("a current cache gave no log paths")
	}
	want := map[string]string{"c1": filepath.Join(logs, "ns_p1_u1", "app", "2.log")}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("log paths (-want +got):\n%s", diff)
	}
}
