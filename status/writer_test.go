package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/internal/periodictest"
	"github.com/nodekit/nodekit/kubeclient/clientset"
	"github.com/nodekit/nodekit/sources"
	"github.com/nodekit/nodekit/status/statustest"
)

const (
	testNode                     = "node-a"
	gate     v1.PodConditionType = "example.com/gate"
)

// boundPod is a pod bound to testNode as the API server holds it after the
// scheduler: PodScheduled and a readiness gate's condition set.
func boundPod(name string, uid types.UID) *v1.Pod {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid,
			Annotations: map[string]string{sources.AnnotationSource: sources.APIServerSource}},
		Spec: v1.PodSpec{NodeName: testNode, Containers: []v1.Container{{Name: "c", Image: "img"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: t0},
			{Type: gate, Status: v1.ConditionTrue, LastTransitionTime: t0},
		}},
	}
}

// staticPod is a static pod from a file with its hash.
func staticPod(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(hash),
			Annotations: map[string]string{sources.AnnotationSource: sources.FileSource, sources.AnnotationHash: hash}},
		Spec: v1.PodSpec{NodeName: testNode, Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
}

func mirrorOf(static *v1.Pod, hash string) *v1.Pod {
	m := static.DeepCopy()
	m.UID = ""
	m.Annotations[sources.AnnotationMirror] = hash
	m.Status = v1.PodStatus{Phase: v1.PodPending}
	return m
}

// podStatus is the status the agent generates: phase, one container in
// the state given, owned conditions.
func podStatus(phase v1.PodPhase, state string, ready bool) v1.PodStatus {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	cs := v1.ContainerStatus{Name: "c", Image: "img"}
	switch state {
	case "waiting":
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case "running":
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: t0}
		cs.ContainerID = "fake://c1"
	case "exited":
		cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: t0, FinishedAt: t0}
		cs.ContainerID = "fake://c1"
	}
	cs.Ready = ready
	r := v1.ConditionFalse
	if ready {
		r = v1.ConditionTrue
	}
	return v1.PodStatus{
		Phase:             phase,
		PodIP:             "10.1.0.5",
		PodIPs:            []v1.PodIP{{IP: "10.1.0.5"}},
		StartTime:         &t0,
		ContainerStatuses: []v1.ContainerStatus{cs},
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: r},
			{Type: v1.ContainersReady, Status: r},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		},
	}
}

// runManager starts m.Run in the bubble; stop cancels it and checks it returned
// nil.
func runManager(t *testing.T, m *Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	}
}

// settle lets the writer run after a change (its WriteDelay) and waits
// until it is idle.
func settle() {
	time.Sleep(DefaultWriteDelay)
	synctest.Wait()
}

// patches returns the bodies of the status PATCHes sent.
func patches(t *testing.T, f *statustest.FakeAPI) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, a := range f.PodActions("patch") {
		pa := a.(k8stesting.PatchAction)
		if pa.GetSubresource() != "status" {
			t.Errorf("PATCH of subresource %q, want status", pa.GetSubresource())
		}
		var m map[string]any
		if err := json.Unmarshal(pa.GetPatch(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func storedStatus(t *testing.T, f *statustest.FakeAPI, name string) v1.PodStatus {
	t.Helper()
	p := f.Pod("default", name)
	if p == nil {
		t.Fatalf("pod %s not in the API server", name)
	}
	return p.Status
}

func conditionStatus(s v1.PodStatus, ct v1.PodConditionType) v1.ConditionStatus {
	if c := findCondition(s.Conditions, ct); c != nil {
		return c.Status
	}
	return ""
}

// On a goroutine of the Manager's own and as a task of a periodic.Driver
// (Options.Periodic).
func TestWritePatchesStatus(t *testing.T) {
	for _, driver := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", driver), func(t *testing.T) { testWritePatchesStatus(t, driver) })
	}
}

// withDriver sets o.Periodic to a Driver that runs until the test ends,
// when driver is set.
func withDriver(t *testing.T, driver bool, o Options) Options {
	if driver {
		o.Periodic = periodictest.Start(t)
	}
	return o
}

func testWritePatchesStatus(t *testing.T, driver bool) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		m := NewManager(withDriver(t, driver, Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)}))
		defer runManager(t, m)()

		// The pod as the API server gave it: the write needs no read.
		pod := f.Pod("default", "web")
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		got := storedStatus(t, f, "web")
		if got.Phase != v1.PodRunning || got.PodIP != "10.1.0.5" || len(got.ContainerStatuses) != 1 || got.ContainerStatuses[0].State.Running == nil {
			t.Errorf("stored status = %+v, want Running with the pod IP and a running container", got)
		}
		for ct, want := range map[v1.PodConditionType]v1.ConditionStatus{v1.PodReady: v1.ConditionTrue, v1.PodScheduled: v1.ConditionTrue, gate: v1.ConditionTrue} {
			if s := conditionStatus(got, ct); s != want {
				t.Errorf("condition %s = %q, want %q", ct, s, want)
			}
		}
		ps := patches(t, f)
		if len(ps) != 1 {
			t.Fatalf("%d PATCHes, want 1", len(ps))
		}
		meta, _ := ps[0]["metadata"].(map[string]any)
		if meta["uid"] != "uid-web" || meta["resourceVersion"] == nil {
			t.Errorf("PATCH metadata = %v, want the pod's uid and resourceVersion as preconditions", meta)
		}
		if diff := cmp.Diff(Stats{Patches: 1}, m.Stats()); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		if m.WrittenVersion(pod.UID) != m.Version(pod.UID) {
			t.Errorf("written version %d, want %d", m.WrittenVersion(pod.UID), m.Version(pod.UID))
		}

		// Nothing changed: the resync writes nothing.
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()
		if n := len(f.PodActions("patch")); n != 1 {
			t.Errorf("%d PATCHes after an idle resync, want 1", n)
		}
	})
}

// The pod a PATCH returned, which a manager without a view of the API
// server holds as the base of its next write, is kept without its spec (but spec.nodeName) and
// managedFields; the next write and the resync work from it as before.
func TestWrittenPodHeldTrimmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		pod := f.Pod("default", "web")
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		m.mu.Lock()
		held := m.pods[pod.UID].api
		m.mu.Unlock()
		if held == nil || held == pod {
			t.Fatalf("held %p (the source's %p), want the PATCH's answer", held, pod)
		}
		if held.Spec.Containers != nil || held.Spec.NodeName != testNode || held.ManagedFields != nil || held.UID != pod.UID || held.Status.Phase != v1.PodRunning {
			t.Errorf("held pod: spec %+v, managedFields %v, uid %s, phase %s; want only spec.nodeName, no managedFields, the pod's UID, Running",
				held.Spec, held.ManagedFields, held.UID, held.Status.Phase)
		}

		// The next write starts from it: one PATCH, no read.
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", false))
		settle()
		if got := storedStatus(t, f, "web"); conditionStatus(got, v1.PodReady) != v1.ConditionFalse {
			t.Errorf("Ready = %q after the second write, want False", conditionStatus(got, v1.PodReady))
		}
		if diff := cmp.Diff(Stats{Patches: 2}, m.Stats()); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
	})
}

// With a view of the API server (APIPod), the manager keeps no copy of
// the pod a PATCH returned: the next write starts from the view once it
// shows the version written, and reads the pod while the view is behind,
// rather than send a PATCH the preconditions would refuse.
func TestWrittenPodNotHeldWithAView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		var (
			mu   sync.Mutex
			view = f.Pod("default", "web")
		)
		setView := func(p *v1.Pod) { mu.Lock(); view = p; mu.Unlock() }
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t),
			APIPod: func(uid types.UID) (*v1.Pod, bool) {
				mu.Lock()
				defer mu.Unlock()
				return view, view.UID == uid
			}})
		defer runManager(t, m)()
		pod := f.Pod("default", "web")
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()
		m.mu.Lock()
		held, last := m.pods[pod.UID].api, m.pods[pod.UID].last
		m.mu.Unlock()
		written := f.Pod("default", "web")
		if held != nil || last != versionOf(written) {
			t.Fatalf("held %p at %+v, want nothing held at the written version %+v", held, last, versionOf(written))
		}

		// The view shows the write: the next write starts from it.
		setView(written)
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", false))
		settle()
		if got := storedStatus(t, f, "web"); conditionStatus(got, v1.PodReady) != v1.ConditionFalse {
			t.Errorf("Ready = %q after the second write, want False", conditionStatus(got, v1.PodReady))
		}
		if diff := cmp.Diff(Stats{Patches: 2}, m.Stats()); diff != "" {
			t.Errorf("after a write from the view, stats (-want +got):\n%s", diff)
		}

		// The view is behind the second write: the pod is read, and one
		// PATCH sent.
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()
		if got := storedStatus(t, f, "web"); conditionStatus(got, v1.PodReady) != v1.ConditionTrue {
			t.Errorf("Ready = %q after the third write, want True", conditionStatus(got, v1.PodReady))
		}
		if diff := cmp.Diff(Stats{Patches: 3, Gets: 1}, m.Stats()); diff != "" {
			t.Errorf("after a write with the view behind, stats (-want +got):\n%s", diff)
		}

		// The resync finds the view current: nothing is written.
		setView(f.Pod("default", "web"))
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()
		if diff := cmp.Diff(Stats{Patches: 3, Gets: 1}, m.Stats()); diff != "" {
			t.Errorf("after an idle resync, stats (-want +got):\n%s", diff)
		}
	})
}

// TestStalePodObjectIsReadAgain: the pod object the agent holds is older
// than the API server's; the PATCH based on it is refused and the pod read
// again.
func TestStalePodObjectIsReadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		pod := f.Pod("default", "web")
		body := `{"status":{"conditions":[{"type":"example.com/other","status":"True"}]}}`
		if _, err := f.CoreV1().Pods("default").Patch(t.Context(), "web", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		got := storedStatus(t, f, "web")
		if got.Phase != v1.PodRunning || conditionStatus(got, "example.com/other") != v1.ConditionTrue {
			t.Errorf("stored phase %s conditions %+v, want Running with the other condition kept", got.Phase, got.Conditions)
		}
		if diff := cmp.Diff(Stats{Gets: 1, Patches: 2, Conflicts: 1}, m.Stats()); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
	})
}

func TestCoalescesChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("web", "uid-web")
		f := statustest.NewFakeAPI(pod)
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()

		m.SetPodStatus(pod, podStatus(v1.PodPending, "waiting", false))
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", false))
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		if n := len(f.PodActions("patch")); n != 1 {
			t.Errorf("%d PATCHes, want 1 for three changes", n)
		}
		if s := conditionStatus(storedStatus(t, f, "web"), v1.PodReady); s != v1.ConditionTrue {
			t.Errorf("stored Ready = %q, want the latest status (True)", s)
		}
	})
}

// TestNewerStatusWhilePatchInFlight holds the first PATCH in flight while
// two newer statuses are set: the writer then sends the newest, never the
// one in between, and the stored status ends with the newest.
func TestNewerStatusWhilePatchInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("web", "uid-web")
		f := statustest.NewFakeAPI(pod)
		entered, release := make(chan struct{}), make(chan struct{})
		var first sync.Once
		f.BeforeWrite(func(a k8stesting.Action) {
			first.Do(func() {
				close(entered)
				<-release
			})
		})
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()

		m.SetPodStatus(pod, podStatus(v1.PodPending, "waiting", false)) // version 1
		time.Sleep(DefaultWriteDelay)
		<-entered
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", false)) // version 2
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))  // version 3
		close(release)
		settle()

		ps := patches(t, f)
		var phases []string
		for _, p := range ps {
			st, _ := p["status"].(map[string]any)
			ph, _ := st["phase"].(string)
			ready := ""
			if cs, ok := st["conditions"].([]any); ok {
				for _, c := range cs {
					if c := c.(map[string]any); c["type"] == "Ready" {
						ready = c["status"].(string)
					}
				}
			}
			phases = append(phases, ph+"/"+ready)
		}
		// The first PATCH carries no phase: Pending is stored already.
		if diff := cmp.Diff([]string{"/False", "Running/True"}, phases); diff != "" {
			t.Errorf("PATCHes (phase/Ready) (-want +got):\n%s", diff)
		}
		got := storedStatus(t, f, "web")
		if got.Phase != v1.PodRunning || conditionStatus(got, v1.PodReady) != v1.ConditionTrue {
			t.Errorf("stored status phase %s Ready %s, want Running and True", got.Phase, conditionStatus(got, v1.PodReady))
		}
		if w := m.WrittenVersion(pod.UID); w != 3 {
			t.Errorf("written version %d, want 3", w)
		}
	})
}

// TestTwoWritersNeverRegress races two managers on one pod: the one
// holding the older status (Running) reads the pod, then its PATCH is held
// until the other wrote the newer one (Succeeded). The resource version
// precondition makes the older PATCH fail; read again, the stored terminal
// phase is kept.
func TestTwoWritersNeverRegress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("job", "uid-job")
		f := statustest.NewFakeAPI(pod)
		entered, release := make(chan struct{}), make(chan struct{})
		var held sync.Once
		f.BeforeWrite(func(a k8stesting.Action) {
			if pa, ok := a.(k8stesting.PatchAction); ok && strings.Contains(string(pa.GetPatch()), `"phase":"Running"`) {
				held.Do(func() {
					close(entered)
					<-release
				})
			}
		})
		older := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t).WithName("older")})
		newer := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t).WithName("newer")})
		defer runManager(t, older)()
		defer runManager(t, newer)()

		older.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		time.Sleep(DefaultWriteDelay)
		<-entered
		newer.PodTerminated(pod.UID) // its pod workers saw the containers stop
		newer.SetPodStatus(pod, podStatus(v1.PodSucceeded, "exited", false))
		settle()
		if ph := storedStatus(t, f, "job").Phase; ph != v1.PodSucceeded {
			t.Fatalf("stored phase %s after the newer write, want Succeeded", ph)
		}
		close(release)
		settle()

		got := storedStatus(t, f, "job")
		if got.Phase != v1.PodSucceeded || got.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("stored status phase %s container %+v, want Succeeded with a terminated container", got.Phase, got.ContainerStatuses[0].State)
		}
		if c := older.Stats().Conflicts; c != 1 {
			t.Errorf("older writer: %d conflicts, want 1", c)
		}
		// The older writer stays quiet at its resyncs.
		n := len(f.PodActions("patch"))
		time.Sleep(2 * DefaultResyncPeriod)
		synctest.Wait()
		if got := len(f.PodActions("patch")); got != n {
			t.Errorf("%d more PATCHes after the race, want none", got-n)
		}
	})
}

func TestPodReplacedIsNotWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mine := boundPod("web", "uid-mine")
		f := statustest.NewFakeAPI(mine)
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		m.SetPodStatus(mine, podStatus(v1.PodRunning, "running", true))
		settle()

		// The pod is deleted and created again under the same name.
		if err := f.CoreV1().Pods("default").Delete(t.Context(), "web", *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		other := boundPod("web", "")
		if _, err := f.CoreV1().Pods("default").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m.SetPodStatus(mine, podStatus(v1.PodSucceeded, "exited", false))
		settle()
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()

		if got := storedStatus(t, f, "web"); got.Phase != v1.PodPending || len(got.ContainerStatuses) != 0 {
			t.Errorf("new pod's status = phase %s, %d containers; want it untouched (Pending, none)", got.Phase, len(got.ContainerStatuses))
		}
		for _, p := range patches(t, f)[1:] {
			if meta := p["metadata"].(map[string]any); meta["uid"] != "uid-mine" {
				t.Errorf("PATCH with uid %v, want only uid-mine", meta["uid"])
			}
		}
		// The pod is known gone: no more requests.
		n := len(f.PodActions(""))
		m.SetPodStatus(mine, podStatus(v1.PodFailed, "exited", false))
		settle()
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()
		if got := len(f.PodActions("")); got != n {
			t.Errorf("%d requests for a replaced pod, want none", got-n)
		}
	})
}

func TestConflictIsRetriedOnTheNewPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("web", "uid-web")
		f := statustest.NewFakeAPI(pod)
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", false))
		settle()

		// A controller sets a condition of its own meanwhile.
		body := `{"status":{"conditions":[{"type":"example.com/other","status":"True"}]}}`
		if _, err := f.CoreV1().Pods("default").Patch(t.Context(), "web", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		got := storedStatus(t, f, "web")
		if conditionStatus(got, v1.PodReady) != v1.ConditionTrue || conditionStatus(got, "example.com/other") != v1.ConditionTrue || conditionStatus(got, gate) != v1.ConditionTrue {
			t.Errorf("stored conditions %+v, want Ready and both foreign conditions True", got.Conditions)
		}
		if diff := cmp.Diff(Stats{Gets: 2, Patches: 3, Conflicts: 1}, m.Stats()); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
	})
}

func TestOtherNodesPodIsNotWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("web", "uid-web")
		pod.Spec.NodeName = "node-b"
		f := statustest.NewFakeAPI(pod)
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()
		if n := len(f.PodActions("patch")); n != 0 {
			t.Errorf("%d PATCHes of another node's pod, want 0", n)
		}
	})
}

// TestDeletion covers when a pod being deleted is deleted (grace period 0,
// UID precondition) and when its terminal phase is held back.
func TestDeletion(t *testing.T) {
	tests := []struct {
		name       string
		deleting   bool
		couldRun   bool
		status     v1.PodStatus
		wantPhase  v1.PodPhase // stored; "" when deleted
		wantDelete bool
	}{{
		name: "deleted once terminated", deleting: true, couldRun: false,
		status: podStatus(v1.PodSucceeded, "exited", false), wantDelete: true,
	}, {
		name: "kept while containers could run; terminal phase held back", deleting: true, couldRun: true,
		status: podStatus(v1.PodSucceeded, "exited", false), wantPhase: v1.PodRunning,
	}, {
		name: "not deleted without a deletion timestamp", deleting: false, couldRun: false,
		status: podStatus(v1.PodSucceeded, "exited", false), wantPhase: v1.PodSucceeded,
	}, {
		name: "not deleted while the status shows a running container", deleting: true, couldRun: false,
		status: podStatus(v1.PodRunning, "running", true), wantPhase: v1.PodRunning,
	}, {
		name: "deleted when no container runs, phase not terminal", deleting: true, couldRun: false,
		status: podStatus(v1.PodPending, "waiting", false), wantDelete: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pod := boundPod("web", "uid-web")
				pod.Status.Phase = v1.PodRunning
				f := statustest.NewFakeAPI(pod)
				if tt.deleting {
					if err := f.CoreV1().Pods("default").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					pod = f.Pod("default", "web")
				}
				m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
				defer runManager(t, m)()
				if !tt.couldRun {
					m.PodTerminated(pod.UID)
				}
				m.SetPodStatus(pod, tt.status)
				settle()

				dels := f.PodActions("delete")
				if tt.deleting {
					dels = dels[1:] // the user's
				}
				if got := len(dels) == 1; got != tt.wantDelete {
					t.Fatalf("deleted = %v (%d DELETEs), want %v", got, len(dels), tt.wantDelete)
				}
				if tt.wantDelete {
					opts := dels[0].(k8stesting.DeleteAction).GetDeleteOptions()
					if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "uid-web" {
						t.Errorf("DELETE options %+v, want grace period 0 and UID precondition uid-web", opts)
					}
					if p := f.Pod("default", "web"); p != nil {
						t.Errorf("pod still in the API server: %+v", p.ObjectMeta)
					}
					return
				}
				if ph := storedStatus(t, f, "web").Phase; ph != tt.wantPhase {
					t.Errorf("stored phase %s, want %s", ph, tt.wantPhase)
				}
			})
		})
	}
}

// TestGracefulDeletionSequence follows the agent: the pod is deleted, its
// containers stop (terminal status, containers could still run), then the
// pod workers report it terminated (PodTerminated, and nothing else): the
// terminal phase is written, then the pod deleted.
func TestGracefulDeletionSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("web", "uid-web")
		f := statustest.NewFakeAPI(pod)
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		if err := f.CoreV1().Pods("default").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := f.Pod("default", "web")
		m.SetPodStatus(deleted, podStatus(v1.PodSucceeded, "exited", false))
		settle()
		if ph := storedStatus(t, f, "web").Phase; ph != v1.PodRunning {
			t.Fatalf("stored phase %s while containers could run, want Running", ph)
		}

		m.PodTerminated(deleted.UID)
		settle()

		if p := f.Pod("default", "web"); p != nil {
			t.Fatalf("pod still in the API server, phase %s", p.Status.Phase)
		}
		var verbs []string
		for _, a := range f.PodActions("") {
			if a.GetVerb() != "get" {
				verbs = append(verbs, a.GetVerb())
			}
		}
		// Running, Succeeded-held-back (container exited), Succeeded, then
		// the grace-0 delete after the user's.
		if diff := cmp.Diff([]string{"patch", "delete", "patch", "patch", "delete"}, verbs); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		last := patches(t, f)[2]
		if ph := last["status"].(map[string]any)["phase"]; ph != "Succeeded" {
			t.Errorf("last PATCH phase %v, want Succeeded before the delete", ph)
		}
	})
}

// TestAPIServerDown: with the API server not answering, SetPodStatus
// returns at once, the writer gives up the batch at the first failure, and
// the resync writes once it answers again.
func TestAPIServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pods []runtime.Object
		for _, n := range []string{"a", "b", "c"} {
			pods = append(pods, boundPod(n, types.UID("uid-"+n)))
		}
		f := statustest.NewFakeAPI(pods...)
		var down atomic.Bool
		down.Store(true)
		f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if down.Load() {
				return true, nil, &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: errors.New("connection refused")}
			}
			return false, nil, nil
		})
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()

		for _, p := range pods {
			m.SetPodStatus(p.(*v1.Pod), podStatus(v1.PodRunning, "running", true))
		}
		settle()
		if s := m.Stats(); s.Gets != 1 || s.Failures != 1 {
			t.Errorf("stats while down %+v, want one failed GET (batch given up)", s)
		}

		down.Store(false)
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()
		for _, n := range []string{"a", "b", "c"} {
			if ph := storedStatus(t, f, n).Phase; ph != v1.PodRunning {
				t.Errorf("pod %s phase %s after the API server came back, want Running", n, ph)
			}
		}
	})
}

func TestResyncRepairsDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("web", "uid-web")
		f := statustest.NewFakeAPI(pod)
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t),
			APIPod: func(types.UID) (*v1.Pod, bool) {
				p := f.Pod("default", "web")
				return p, p != nil
			}})
		defer runManager(t, m)()
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		settle()

		body := `{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}]}}`
		if _, err := f.CoreV1().Pods("default").Patch(t.Context(), "web", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()
		got := storedStatus(t, f, "web")
		if got.Phase != v1.PodRunning || conditionStatus(got, v1.PodReady) != v1.ConditionTrue {
			t.Errorf("stored phase %s Ready %s after the resync, want Running and True", got.Phase, conditionStatus(got, v1.PodReady))
		}
	})
}

func TestStaticPodStatusGoesToMirror(t *testing.T) {
	tests := []struct {
		name string
		// mirrorHash is the API mirror pod's hash; "" for none.
		mirrorHash string
		// hook: Options.MirrorPod is set (returning the API's mirror).
		hook      bool
		wantPatch bool
	}{
		{name: "mirror pod read by name", mirrorHash: "h1", wantPatch: true},
		{name: "mirror pod from the hook", mirrorHash: "h1", hook: true, wantPatch: true},
		{name: "no mirror pod yet", mirrorHash: ""},
		{name: "no mirror pod yet, hook", mirrorHash: "", hook: true},
		{name: "stale mirror pod", mirrorHash: "h0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				static := staticPod("etcd-node-a", "h1")
				var objs []runtime.Object
				if tt.mirrorHash != "" {
					objs = append(objs, mirrorOf(static, tt.mirrorHash))
				}
				f := statustest.NewFakeAPI(objs...)
				opts := Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)}
				if tt.hook {
					opts.MirrorPod = func(s *v1.Pod) (*v1.Pod, bool) {
						p := f.Pod(s.Namespace, s.Name)
						return p, p != nil && p.Annotations[sources.AnnotationMirror] == s.Annotations[sources.AnnotationHash]
					}
				}
				m := NewManager(opts)
				defer runManager(t, m)()
				m.SetPodStatus(static, podStatus(v1.PodRunning, "running", true))
				settle()

				ps := patches(t, f)
				if got := len(ps) == 1; got != tt.wantPatch {
					t.Fatalf("%d PATCHes, want patched %v", len(ps), tt.wantPatch)
				}
				if tt.hook && tt.mirrorHash == "" && len(f.PodActions("")) != 0 {
					t.Errorf("%d requests without a mirror pod, want none", len(f.PodActions("")))
				}
				if !tt.wantPatch {
					return
				}
				mp := f.Pod("default", "etcd-node-a")
				if meta := ps[0]["metadata"].(map[string]any); meta["uid"] != string(mp.UID) {
					t.Errorf("PATCH uid %v, want the mirror pod's %s", meta["uid"], mp.UID)
				}
				if mp.Status.Phase != v1.PodRunning {
					t.Errorf("mirror pod phase %s, want Running", mp.Status.Phase)
				}
			})
		})
	}
}

// TestStaticPodMirrorCreatedLater: the status waits for the mirror pod and
// is written once Requeue says it exists.
func TestStaticPodMirrorCreatedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		static := staticPod("etcd-node-a", "h1")
		f := statustest.NewFakeAPI()
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)})
		defer runManager(t, m)()
		m.SetPodStatus(static, podStatus(v1.PodRunning, "running", true))
		settle()
		if _, err := f.CoreV1().Pods("default").Create(t.Context(), mirrorOf(static, "h1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m.Requeue(static.UID)
		settle()
		if ph := storedStatus(t, f, "etcd-node-a").Phase; ph != v1.PodRunning {
			t.Errorf("mirror pod phase %s, want Running", ph)
		}
	})
}

func TestRunWithoutClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewManager(Options{})
		stop := runManager(t, m)
		m.SetPodStatus(boundPod("web", "u"), podStatus(v1.PodRunning, "running", true))
		synctest.Wait()
		stop()
		if err := m.Run(t.Context()); err == nil {
			t.Error("second Run() = nil, want an error")
		}
	})
}

// TestAPIServerDownLogsOnceAMinute: while the API server is away, the
// failed writes of every pass (each status change and each resync) are
// logged once, then once a minute with the count of those not logged.
func TestAPIServerDownLogsOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := boundPod("a", "uid-a")
		f := statustest.NewFakeAPI(pod)
		f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: errors.New("connection refused")}
		})
		var mu sync.Mutex
		var lines []string
		logger := funcr.New(func(_, args string) {
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(args, "Writing pod status") {
				lines = append(lines, args)
			}
		}, funcr.Options{})
		m := NewManager(Options{Client: clientset.From(f), NodeName: testNode, Logger: logger})
		defer runManager(t, m)()
		// A status change every 2 s for 150 s, and the resyncs: 15 passes at least.
		for i := range 75 {
			m.SetPodStatus(pod, podStatus(v1.PodRunning, fmt.Sprintf("running %d", i), true))
			time.Sleep(2 * time.Second)
			synctest.Wait()
		}
		if s := m.Stats(); s.Failures < 10 {
			t.Fatalf("stats %+v, want a failed write on each pass (at least each resync)", s)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lines) != 3 {
			t.Errorf("%d lines of failed writes in 150 s, want 3 (at 0, 60 and 120 s):\n%s", len(lines), strings.Join(lines, "\n"))
		}
	})
}

// TestResyncIdleWithoutPods: with no pod's status held the writer has
// nothing to resync and does not wake; the first status starts the
// resyncs, every ResyncPeriod, and they stop once the pod is forgotten.
// Without a Driver and with one.
func TestResyncIdleWithoutPods(t *testing.T) {
	for _, driver := range []bool{false, true} {
		t.Run(fmt.Sprintf("driver=%v", driver), func(t *testing.T) { testResyncIdleWithoutPods(t, driver) })
	}
}

func testResyncIdleWithoutPods(t *testing.T, driver bool) {
	synctest.Test(t, func(t *testing.T) {
		f := statustest.NewFakeAPI(boundPod("web", "uid-web"))
		m := NewManager(withDriver(t, driver, Options{Client: clientset.From(f), NodeName: testNode, Logger: testr.New(t)}))
		defer runManager(t, m)()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := m.resyncs.Load(); n != 0 {
			t.Fatalf("%d resyncs with no pod, want 0", n)
		}
		pod := f.Pod("default", "web")
		m.SetPodStatus(pod, podStatus(v1.PodRunning, "running", true))
		synctest.Wait()
		time.Sleep(3*DefaultResyncPeriod + time.Second)
		synctest.Wait()
		if n := m.resyncs.Load(); n != 3 {
			t.Fatalf("%d resyncs over 3 periods with a pod, want 3", n)
		}
		m.RemoveOrphans(nil)
		time.Sleep(DefaultResyncPeriod)
		synctest.Wait()
		n := m.resyncs.Load()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got := m.resyncs.Load(); got != n {
			t.Errorf("%d resyncs once the pod was forgotten, want none", got-n)
		}
		if ps := len(f.PodActions("patch")); ps != 1 {
			t.Errorf("%d PATCHes, want 1", ps)
		}
	})
}
