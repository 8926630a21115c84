package pleg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

func TestAppendEvents(t *testing.T) {
	const (
		uid types.UID = "pod"
		cid           = "c1"
	)
	started := Event{ID: uid, Type: ContainerStarted, Data: cid}
	died := Event{ID: uid, Type: ContainerDied, Data: cid}
	removed := Event{ID: uid, Type: ContainerRemoved, Data: cid}
	changed := Event{ID: uid, Type: ContainerChanged, Data: cid}
	states := []plegState{stateRunning, stateExited, stateUnknown, stateNonExistent}
	// want[old][new], the kubelet's generateEvents.
	want := map[plegState]map[plegState][]Event{
		stateRunning: {
			stateRunning: nil, stateExited: {died}, stateUnknown: {changed}, stateNonExistent: {died, removed},
		},
		stateExited: {
			stateRunning: {started}, stateExited: nil, stateUnknown: {changed}, stateNonExistent: {removed},
		},
		stateUnknown: {
			stateRunning: {started}, stateExited: {died}, stateUnknown: nil, stateNonExistent: {died, removed},
		},
		stateNonExistent: {
			stateRunning: {started}, stateExited: {died}, stateUnknown: {changed}, stateNonExistent: nil,
		},
	}
	for _, old := range states {
		for _, cur := range states {
			t.Run(old.String()+"->"+cur.String(), func(t *testing.T) {
				prefix := []*Event{{ID: "other", Type: PodSync}}
				got := appendEvents(prefix, uid, cid, old, cur)
				if got[0] != prefix[0] {
					t.Fatal("appendEvents lost what dst held")
				}
				if diff := cmp.Diff(want[old][cur], values(got[1:]), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestStateConversion(t *testing.T) {
	containers := map[runtimeapi.ContainerState]plegState{
		runtimeapi.ContainerState_CONTAINER_CREATED: stateUnknown,
		runtimeapi.ContainerState_CONTAINER_RUNNING: stateRunning,
		runtimeapi.ContainerState_CONTAINER_EXITED:  stateExited,
		runtimeapi.ContainerState_CONTAINER_UNKNOWN: stateUnknown,
		runtimeapi.ContainerState(42):               stateUnknown,
	}
	for in, want := range containers {
		if got := containerState(in); got != want {
			t.Errorf("containerState(%v) = %v, want %v", in, got, want)
		}
	}
	sandboxes := map[runtimeapi.PodSandboxState]plegState{
		runtimeapi.PodSandboxState_SANDBOX_READY:    stateRunning,
		runtimeapi.PodSandboxState_SANDBOX_NOTREADY: stateExited,
	}
	for in, want := range sandboxes {
		if got := sandboxState(in); got != want {
			t.Errorf("sandboxState(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    GenericOptions
		want    GenericOptions
		wantErr string
	}{
		{"defaults", GenericOptions{}, GenericOptions{RelistPeriod: time.Second, RelistThreshold: 3 * time.Minute, ChannelCapacity: 1000}, ""},
		{"kept", GenericOptions{RelistPeriod: 2 * time.Second, RelistThreshold: time.Minute, ChannelCapacity: 5},
			GenericOptions{RelistPeriod: 2 * time.Second, RelistThreshold: time.Minute, ChannelCapacity: 5}, ""},
		{"negative period", GenericOptions{RelistPeriod: -1}, GenericOptions{}, "RelistPeriod"},
		{"threshold below period", GenericOptions{RelistPeriod: time.Minute, RelistThreshold: time.Second}, GenericOptions{}, "RelistThreshold"},
		{"negative capacity", GenericOptions{ChannelCapacity: -1}, GenericOptions{}, "ChannelCapacity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGeneric(runtimetest.New(runtimetest.Options{}), nopStatus, NewCache(), tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "pleg: ") {
					t.Errorf("NewGeneric error = %v, want one about %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, g.opts, cmpopts.IgnoreFields(GenericOptions{}, "Logger")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if cap(g.events) != tt.want.ChannelCapacity {
				t.Errorf("channel capacity %d, want %d", cap(g.events), tt.want.ChannelCapacity)
			}
		})
	}
	for name, build := range map[string]func() (*Generic, error){
		"nil lister": func() (*Generic, error) { return NewGeneric(nil, nopStatus, NewCache(), GenericOptions{}) },
		"nil status": func() (*Generic, error) {
			return NewGeneric(runtimetest.New(runtimetest.Options{}), nil, NewCache(), GenericOptions{})
		},
		"nil cache": func() (*Generic, error) {
			return NewGeneric(runtimetest.New(runtimetest.Options{}), nopStatus, nil, GenericOptions{})
		},
	} {
		if _, err := build(); err == nil {
			t.Errorf("NewGeneric with %s succeeded", name)
		}
	}
}

var nopStatus = StatusGetterFunc(func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace}, nil
})

// values dereferences events for comparisons.
func values(events []*Event) []Event {
	var out []Event
	for _, e := range events {
		out = append(out, *e)
	}
	return out
}

func drain(ch <-chan *Event) []Event {
	var out []Event
	for {
		select {
		case e := <-ch:
			out = append(out, *e)
		default:
			return out
		}
	}
}

// sortEvents orders events by pod, then container, keeping the order of
// the events of one container.
var sortEvents = cmpopts.SortSlices(func(a, b Event) bool {
	if a.ID != b.ID {
		return a.ID < b.ID
	}
	if a.Data != b.Data {
		return a.Data < b.Data
	}
	return eventRank(a.Type) < eventRank(b.Type)
})

func eventRank(t EventType) int {
	switch t {
	case ContainerDied:
		return 1
	case ContainerRemoved:
		return 2
	}
	return 0
}

// runtimeStatus reads pod statuses from a runtimetest.Runtime, much as
// podruntime.Manager does.
func runtimeStatus(rt *runtimetest.Runtime) StatusGetterFunc {
	return func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
		sel := map[string]string{runtime.LabelPodUID: string(uid)}
		sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		st := &runtime.PodStatus{ID: uid, Name: name, Namespace: namespace, TimeStamp: time.Now()}
		for _, s := range sandboxes {
			resp, err := rt.PodSandboxStatus(ctx, s.Id, false)
			if err != nil {
				return nil, err
			}
			st.SandboxStatuses = append(st.SandboxStatuses, resp.Status)
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY && resp.Status.GetNetwork().GetIp() != "" {
				st.IPs = []string{resp.Status.Network.Ip}
			}
		}
		for _, c := range containers {
			st.ContainerStatuses = append(st.ContainerStatuses, &runtime.ContainerStatus{
				ID:    c.Id,
				Name:  c.Metadata.Name,
				State: runtime.StateFromCRI(c.State),
			})
		}
		return st, nil
	}
}

// fixture is a runtimetest.Runtime with a Generic PLEG on it.
type fixture struct {
	t     *testing.T
	rt    *runtimetest.Runtime
	cache *StatusCache
	g     *Generic
}

func newFixture(t *testing.T, status StatusGetter, opts GenericOptions) *fixture {
	t.Helper()
	rt := runtimetest.New(runtimetest.Options{Images: []string{"busybox"}})
	t.Cleanup(rt.Close)
	if status == nil {
		status = runtimeStatus(rt)
	}
	cache := NewCache()
	g, err := NewGeneric(rt, status, cache, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, rt: rt, cache: cache, g: g}
}

func podConfig(uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + uid, Namespace: "ns", Uid: uid},
		Labels: map[string]string{
			runtime.LabelPodUID:       uid,
			runtime.LabelPodName:      "pod-" + uid,
			runtime.LabelPodNamespace: "ns",
		},
	}
}

// runSandbox starts a sandbox for pod uid.
func (f *fixture) runSandbox(uid string) string {
	f.t.Helper()
	id, err := f.rt.RunPodSandbox(f.t.Context(), podConfig(uid), "")
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// createContainer creates (and starts, if start) a container in the
// sandbox of pod uid.
func (f *fixture) createContainer(uid, sandboxID, name string, start bool, command ...string) string {
	f.t.Helper()
	sc := podConfig(uid)
	id, err := f.rt.CreateContainer(f.t.Context(), sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  command,
		Labels: map[string]string{
			runtime.LabelPodUID:        uid,
			runtime.LabelPodName:       "pod-" + uid,
			runtime.LabelPodNamespace:  "ns",
			runtime.LabelContainerName: name,
		},
	}, sc)
	if err != nil {
		f.t.Fatal(err)
	}
	if start {
		if err := f.rt.StartContainer(f.t.Context(), id); err != nil {
			f.t.Fatal(err)
		}
	}
	return id
}

func (f *fixture) relist() []Event {
	f.t.Helper()
	if err := f.g.Relist(f.t.Context()); err != nil {
		f.t.Fatalf("Relist: %v", err)
	}
	return drain(f.g.Events())
}

// cachedStates returns the container states the cache holds for the pod.
func (f *fixture) cachedStates(uid types.UID) map[string]runtime.ContainerState {
	st, err := f.cache.Get(uid)
	if err != nil {
		f.t.Fatalf("cache.Get(%s): %v", uid, err)
	}
	out := map[string]runtime.ContainerState{}
	for _, c := range st.ContainerStatuses {
		out[c.ID] = c.State
	}
	return out
}

func TestRelistEventsAndCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{})
		ctx := t.Context()
		if got := f.relist(); len(got) != 0 {
			t.Fatalf("events of an empty runtime: %v", got)
		}

		sb := f.runSandbox("a")
		c1 := f.createContainer("a", sb, "app", true, "sh", "-c", "sleep 5; exit 3")
		c2 := f.createContainer("a", sb, "side", false)
		got := f.relist()
		want := []Event{
			{ID: "a", Type: ContainerStarted, Data: sb},
			{ID: "a", Type: ContainerStarted, Data: c1},
			// c2 is created: ContainerChanged, not sent.
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events after start (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]runtime.ContainerState{c1: runtime.ContainerStateRunning, c2: runtime.ContainerStateCreated}, f.cachedStates("a")); diff != "" {
			t.Errorf("cache after start (-want +got):\n%s", diff)
		}
		st, _ := f.cache.Get("a")
		if st.Name != "pod-a" || st.Namespace != "ns" || len(st.IPs) != 1 {
			t.Errorf("cached status = %+v; want name, namespace and IP", st)
		}

		// Nothing changed: no events, no inspection.
		calls := f.rt.Calls("ContainerStatus") + f.rt.Calls("PodSandboxStatus")
		if got := f.relist(); len(got) != 0 {
			t.Errorf("events without changes: %v", got)
		}
		if f.rt.Calls("ContainerStatus")+f.rt.Calls("PodSandboxStatus") != calls {
			t.Error("an unchanged pod was inspected")
		}

		// The program exits.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if diff := cmp.Diff([]Event{{ID: "a", Type: ContainerDied, Data: c1}}, f.relist()); diff != "" {
			t.Errorf("events after exit (-want +got):\n%s", diff)
		}
		if got := f.cachedStates("a")[c1]; got != runtime.ContainerStateExited {
			t.Errorf("cached state of c1 after exit = %v", got)
		}

		// Remove the exited container, start the created one.
		if err := f.rt.RemoveContainer(ctx, c1); err != nil {
			t.Fatal(err)
		}
		if err := f.rt.StartContainer(ctx, c2); err != nil {
			t.Fatal(err)
		}
		want = []Event{{ID: "a", Type: ContainerRemoved, Data: c1}, {ID: "a", Type: ContainerStarted, Data: c2}}
		if diff := cmp.Diff(want, f.relist(), sortEvents); diff != "" {
			t.Errorf("events after remove and start (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]runtime.ContainerState{c2: runtime.ContainerStateRunning}, f.cachedStates("a")); diff != "" {
			t.Errorf("cache after remove (-want +got):\n%s", diff)
		}

		// A second pod appears while the first is removed whole: a running
		// container and the ready sandbox die and are removed at once.
		sb2 := f.runSandbox("b")
		if err := f.rt.RemovePodSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		want = []Event{
			{ID: "a", Type: ContainerDied, Data: sb},
			{ID: "a", Type: ContainerRemoved, Data: sb},
			{ID: "a", Type: ContainerDied, Data: c2},
			{ID: "a", Type: ContainerRemoved, Data: c2},
			{ID: "b", Type: ContainerStarted, Data: sb2},
		}
		if diff := cmp.Diff(want, f.relist(), sortEvents); diff != "" {
			t.Errorf("events after removing pod a (-want +got):\n%s", diff)
		}
		if st, _ := f.cache.Get("a"); len(st.ContainerStatuses) != 0 || st.Name != "" {
			t.Errorf("cache still holds removed pod a: %+v", st)
		}
		f.g.mu.Lock()
		defer f.g.mu.Unlock()
		if len(f.g.pods) != 1 || len(f.g.ctrs) != 1 {
			t.Errorf("records left: %d pods, %d containers; want 1 and 1", len(f.g.pods), len(f.g.ctrs))
		}
	})
}

func TestRelistSandboxStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{})
		sb := f.runSandbox("a")
		c := f.createContainer("a", sb, "app", true)
		f.relist()
		if err := f.rt.StopPodSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
		want := []Event{{ID: "a", Type: ContainerDied, Data: sb}, {ID: "a", Type: ContainerDied, Data: c}}
		if diff := cmp.Diff(want, f.relist(), sortEvents); diff != "" {
			t.Errorf("events after StopPodSandbox (-want +got):\n%s", diff)
		}
		// The IP survives the sandbox's teardown in the cache.
		st, _ := f.cache.Get("a")
		if len(st.IPs) != 1 {
			t.Errorf("cached IPs after stop = %v; want the IP kept", st.IPs)
		}
	})
}

func TestRelistIgnoresForeignObjects(t *testing.T) {
	f := newFixture(t, nil, GenericOptions{})
	ctx := t.Context()
	// No pod UID anywhere: not ours.
	if _, err := f.rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "x"}}, ""); err != nil {
		t.Fatal(err)
	}
	// A sandbox with only a metadata UID counts.
	sb, err := f.rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "y", Namespace: "ns", Uid: "u"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Event{{ID: "u", Type: ContainerStarted, Data: sb}}, f.relist()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestRelistReinspectsAfterStatusError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			fail  = map[types.UID]bool{"a": true}
			calls = map[types.UID]int{}
			f     *fixture
		)
		boom := errors.New("boom")
		getter := StatusGetterFunc(func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
			mu.Lock()
			calls[uid]++
			failing := fail[uid]
			mu.Unlock()
			if failing {
				return nil, boom
			}
			return runtimeStatus(f.rt)(ctx, uid, name, namespace)
		})
		f = newFixture(t, getter, GenericOptions{})
		sbA := f.runSandbox("a")
		sbB := f.runSandbox("b")

		// Pod a cannot be inspected: its events wait, the cache holds the
		// error, pod b goes on.
		if diff := cmp.Diff([]Event{{ID: "b", Type: ContainerStarted, Data: sbB}}, f.relist()); diff != "" {
			t.Errorf("events with a failing pod (-want +got):\n%s", diff)
		}
		if _, err := f.cache.Get("a"); !errors.Is(err, boom) {
			t.Errorf("cache error for a = %v, want boom", err)
		}
		// Still failing: inspected again, still no events.
		if got := f.relist(); len(got) != 0 {
			t.Errorf("events while a still fails: %v", got)
		}
		mu.Lock()
		if calls["a"] != 2 || calls["b"] != 1 {
			t.Errorf("GetPodStatus calls = %v; want a twice, b once", calls)
		}
		fail["a"] = false
		mu.Unlock()

		// Recovered: the events come, the cache is right, then quiet.
		if diff := cmp.Diff([]Event{{ID: "a", Type: ContainerStarted, Data: sbA}}, f.relist()); diff != "" {
			t.Errorf("events after recovery (-want +got):\n%s", diff)
		}
		if st, err := f.cache.Get("a"); err != nil || len(st.SandboxStatuses) != 1 {
			t.Errorf("cache for a after recovery = %+v, %v", st, err)
		}
		if got := f.relist(); len(got) != 0 {
			t.Errorf("events after recovery is done: %v", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if calls["a"] != 3 {
			t.Errorf("a inspected %d times; want 3 (no more after it succeeded)", calls["a"])
		}
	})
}

func TestRelistFullChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inspected := map[types.UID]int{}
		var f *fixture
		getter := StatusGetterFunc(func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
			inspected[uid]++
			return runtimeStatus(f.rt)(ctx, uid, name, namespace)
		})
		f = newFixture(t, getter, GenericOptions{ChannelCapacity: 1})
		sbA := f.runSandbox("a")
		f.createContainer("a", sbA, "app", true)
		sbB := f.runSandbox("b")

		// Three events, room for one.
		if err := f.g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := f.g.DroppedEvents(); got != 2 {
			t.Errorf("DroppedEvents = %d, want 2", got)
		}
		if diff := cmp.Diff([]Event{{ID: "a", Type: ContainerStarted, Data: sbA}}, drain(f.g.Events())); diff != "" {
			t.Errorf("delivered events (-want +got):\n%s", diff)
		}

		// Next relist: a PodSync for each pod that lost an event. Room for
		// one again: b's waits another round.
		if err := f.g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		first := drain(f.g.Events())
		if err := f.g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		second := drain(f.g.Events())
		want := []Event{{ID: "a", Type: PodSync}, {ID: "b", Type: PodSync}}
		if diff := cmp.Diff(want, append(first, second...), sortEvents); diff != "" {
			t.Errorf("recovery events (-want +got):\n%s", diff)
		}
		if got := f.g.DroppedEvents(); got != 3 {
			t.Errorf("DroppedEvents = %d, want 3", got)
		}
		// Their cached statuses show them as listed: the PodSyncs need no
		// fresh inspection.
		if inspected["a"] != 1 || inspected["b"] != 1 {
			t.Errorf("inspections %v; want each pod inspected once", inspected)
		}
		// Everything delivered: quiet from now on.
		if got := f.relist(); len(got) != 0 {
			t.Errorf("events after recovery: %v", got)
		}
		_ = sbB
	})
}

func TestRelistFullChannelPodGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{ChannelCapacity: 1})
		sb := f.runSandbox("a")
		f.relist()
		if err := f.rt.RemovePodSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
		// Died and Removed, room for one.
		if err := f.g.Relist(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Event{{ID: "a", Type: ContainerDied, Data: sb}}, drain(f.g.Events())); diff != "" {
			t.Errorf("delivered events (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]Event{{ID: "a", Type: PodSync}}, f.relist()); diff != "" {
			t.Errorf("recovery for a removed pod (-want +got):\n%s", diff)
		}
		if got := f.relist(); len(got) != 0 {
			t.Errorf("events after recovery: %v", got)
		}
	})
}

func TestRelistListError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{})
		f.runSandbox("a")
		boom := status.Error(codes.Unavailable, "down")
		for _, method := range []string{"ListPodSandbox", "ListContainers"} {
			f.rt.InjectErrorOnce(method, boom)
			err := f.g.Relist(t.Context())
			if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "pleg: ") {
				t.Errorf("Relist with %s failing = %v", method, err)
			}
			if err := f.g.Healthy(); err == nil {
				t.Errorf("Healthy after a failed relist (%s) and none before", method)
			}
		}
		if got := f.relist(); len(got) != 1 {
			t.Errorf("events after the runtime came back: %v; want the sandbox's start", got)
		}
	})
}

func TestHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{RelistThreshold: time.Minute})
		err := f.g.Healthy()
		if err == nil || !strings.Contains(err.Error(), "no relist") {
			t.Errorf("Healthy before any relist = %v", err)
		}
		f.relist()
		if err := f.g.Healthy(); err != nil {
			t.Errorf("Healthy after a relist = %v", err)
		}
		time.Sleep(time.Minute)
		if err := f.g.Healthy(); err != nil {
			t.Errorf("Healthy at the threshold = %v", err)
		}
		f.rt.SetDown(true)
		if err := f.g.Relist(t.Context()); err == nil {
			t.Error("Relist of a runtime that is down succeeded")
		}
		time.Sleep(time.Second)
		err = f.g.Healthy()
		if err == nil || !strings.Contains(err.Error(), "1m1s ago") || !strings.Contains(err.Error(), "threshold is 1m0s") {
			t.Errorf("Healthy past the threshold = %v; want how long ago", err)
		}
		f.rt.SetDown(false)
		f.relist()
		if err := f.g.Healthy(); err != nil {
			t.Errorf("Healthy after the runtime came back = %v", err)
		}
	})
}

func TestRun(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nopStatus, GenericOptions{RelistPeriod: 2 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- f.g.Run(ctx) }()
		synctest.Wait()
		if got := f.rt.Calls("ListPodSandbox"); got != 1 {
			t.Errorf("%d relists at start, want 1", got)
		}
		if err := f.g.Run(ctx); err == nil {
			t.Error("a second concurrent Run succeeded")
		}
		sb := f.runSandbox("a")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := f.rt.Calls("ListPodSandbox"); got != 2 {
			t.Errorf("%d relists after one period, want 2", got)
		}
		select {
		case ev := <-f.g.Events():
			if diff := cmp.Diff(Event{ID: "a", Type: ContainerStarted, Data: sb}, *ev); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		default:
			t.Error("no event from Run")
		}
		// A failing relist does not stop Run.
		f.rt.InjectErrorOnce("ListContainers", errors.New("boom"))
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if got := f.rt.Calls("ListContainers"); got != 4 {
			t.Errorf("%d relists, want 4", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
		// Run may be called again once it returned.
		ctx2, cancel2 := context.WithCancel(t.Context())
		cancel2()
		if err := f.g.Run(ctx2); err != nil {
			t.Errorf("second Run = %v", err)
		}
	})
}

func TestRelistCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var f *fixture
		getter := StatusGetterFunc(func(c context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
			cancel() // the agent stops during the first inspection
			return runtimeStatus(f.rt)(c, uid, name, namespace)
		})
		f = newFixture(t, getter, GenericOptions{})
		for i := range 3 {
			f.runSandbox(fmt.Sprint(i))
		}
		if err := f.g.Relist(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Relist = %v, want Canceled", err)
		}
		// The next relist finds what the canceled one could not finish.
		got := f.relist()
		if len(got) != 3 {
			t.Errorf("events after a canceled relist: %v; want the three starts", got)
		}
	})
}

func TestRelistRefreshesCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil, GenericOptions{})
		f.runSandbox("a")
		f.relist()
		lastSync := time.Now()
		time.Sleep(time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan *runtime.PodStatus, 1)
		go func() {
			st, err := f.cache.GetNewerThan(ctx, "a", lastSync)
			if err == nil {
				done <- st
			}
		}()
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("GetNewerThan returned before a relist")
		}
		// Nothing changed, so the pod is not inspected again, but the
		// relist vouches for its entry.
		if got := f.relist(); len(got) != 0 {
			t.Fatalf("events: %v", got)
		}
		synctest.Wait()
		select {
		case st := <-done:
			if len(st.SandboxStatuses) != 1 {
				t.Errorf("status after the refresh = %+v", st)
			}
		default:
			t.Error("a relist did not wake a reader waiting for a newer status")
		}
	})
}

// TestOnRelist: each relist reports its duration and the time since the
// previous one started (none for the first).
func TestOnRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var intervals []time.Duration
		g, err := NewGeneric(runtimetest.New(runtimetest.Options{}), nopStatus, NewCache(), GenericOptions{
			OnRelist: func(d, interval time.Duration) { intervals = append(intervals, interval) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := g.Relist(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
		}
		if want := []time.Duration{0, 2 * time.Second, 2 * time.Second}; !slices.Equal(intervals, want) {
			t.Errorf("intervals %v, want %v", intervals, want)
		}
	})
}

// TestRelistTrustsCacheAsListed: a pod whose cached status (read after a
// sync, or on container events) shows its containers and sandboxes as
// the relist lists them is not read again; its events are still sent.
// One that the cache shows otherwise is read.
func TestRelistTrustsCacheAsListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inspected := map[types.UID]int{}
		var f *fixture
		read := runtimeStatus(nil)
		getter := StatusGetterFunc(func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
			inspected[uid]++
			return read(ctx, uid, name, namespace)
		})
		f = newFixture(t, getter, GenericOptions{})
		read = runtimeStatus(f.rt)
		sbA := f.runSandbox("a")
		ctrA := f.createContainer("a", sbA, "app", true)
		sbB := f.runSandbox("b")
		f.createContainer("b", sbB, "app", true)
		// a's status as a sync would have read it; b's is older than its
		// container.
		for _, uid := range []types.UID{"a"} {
			st, err := read(t.Context(), uid, string(uid), "ns")
			if err != nil {
				t.Fatal(err)
			}
			f.cache.Set(uid, st, nil, time.Now())
		}
		f.cache.Set("b", &runtime.PodStatus{ID: "b"}, nil, time.Now())

		got := f.relist()
		want := []Event{
			{ID: "a", Type: ContainerStarted, Data: sbA}, {ID: "a", Type: ContainerStarted, Data: ctrA},
			{ID: "b", Type: ContainerStarted, Data: sbB},
		}
		if len(got) != 4 {
			t.Fatalf("events %v, want 4 (both pods' sandbox and container started)", got)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("event %v missing from %v", w, got)
			}
		}
		if inspected["a"] != 0 || inspected["b"] != 1 {
			t.Errorf("inspections %v; want a none (cached as listed), b once", inspected)
		}
		if err := f.rt.StopContainer(t.Context(), ctrA, 0); err != nil {
			t.Fatal(err)
		}
		f.relist()
		if inspected["a"] != 1 {
			t.Errorf("a inspected %d times after its container stopped, want 1", inspected["a"])
		}
	})
}

// TestRunAggregatesErrorLines: errors that recur on every relist (a full
// channel nobody reads, a runtime that cannot be listed) are logged once,
// then at most once a minute with the count of the lines not logged,
// rather than once per relist.
func TestRunAggregatesErrorLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logSink{}
		f := newFixture(t, nil, GenericOptions{ChannelCapacity: 1, RelistPeriod: time.Second, Logger: logs.logger()})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- f.g.Run(ctx) }()
		// Churn: a new pod every second, whose events find the channel
		// full (nobody reads it), for 150 relists.
		for i := range 150 {
			f.runSandbox(fmt.Sprintf("p%d", i))
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if f.g.DroppedEvents() < 140 {
			t.Fatalf("DroppedEvents = %d, want a drop on each relist", f.g.DroppedEvents())
		}
		// Logged at the first drop, then once a minute (at 60 s and at
		// 120 s), each with the count of the lines not logged.
		if n := logs.count("event channel full"); n != 3 {
			t.Errorf("%d lines of the full channel in 150 relists that dropped, want 3", n)
		}
		if n := logs.count(`"suppressed"=59`); n != 2 {
			t.Errorf("%d lines carry the count of the 59 lines not logged, want 2:\n%s", n, strings.Join(logs.msgs, "\n"))
		}

		// A runtime that cannot be listed: once, then once a minute.
		f.rt.InjectError("ListPodSandbox", errors.New("down"))
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if n := logs.count("relist failed"); n != 2 {
			t.Errorf("%d lines of the failed relist in 90 s, want 2", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestRelistTrustsCacheReadAfterList: a pod whose status in the cache was
// read after the relist listed it (by the sync that started it) is not
// inspected again; its events go out as the list gave them.
func TestRelistTrustsCacheReadAfterList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inspected := map[types.UID]int{}
		read := runtimeStatus(nil)
		getter := StatusGetterFunc(func(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
			inspected[uid]++
			return read(ctx, uid, name, namespace)
		})
		f := newFixture(t, getter, GenericOptions{})
		read = runtimeStatus(f.rt)
		sb := f.runSandbox("c")
		ctr := f.createContainer("c", sb, "app", false)
		// The sync's read after the relist's list, which showed the
		// container created: it shows it started (the bubble's clock
		// does not move while the relist runs: a read a second later
		// stands for it).
		st, err := read(t.Context(), "c", "c", "ns")
		if err != nil {
			t.Fatal(err)
		}
		st.ContainerStatuses[0].State = runtime.ContainerStateRunning
		f.cache.Set("c", st, nil, time.Now().Add(time.Second))
		got := f.relist()
		if want := []Event{{ID: "c", Type: ContainerStarted, Data: sb}}; !slices.Equal(got, want) {
			t.Errorf("events %v, want %v (a created container has none)", got, want)
		}
		if err := f.rt.StartContainer(t.Context(), ctr); err != nil {
			t.Fatal(err)
		}
		// The list now shows what the cache holds.
		if got := f.relist(); !slices.Equal(got, []Event{{ID: "c", Type: ContainerStarted, Data: ctr}}) {
			t.Errorf("events after the start %v, want the container started", got)
		}
		if inspected["c"] != 0 {
			t.Errorf("c inspected %d times, want none (read after the list)", inspected["c"])
		}
	})
}
