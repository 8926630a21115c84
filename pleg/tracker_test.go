package pleg

import (
	"fmt"
	"maps"
	sysruntime "runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/leakcheck"
	"github.com/nodekit/nodekit/runtime"
)

// The container states of the listings below.
const (
	ctrCreated = runtimeapi.ContainerState_CONTAINER_CREATED
	ctrRunning = runtimeapi.ContainerState_CONTAINER_RUNNING
	ctrExited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

// listedSandbox is a sandbox of pod uid as ListPodSandbox returns it.
func listedSandbox(id, uid string, ready bool) *runtimeapi.PodSandbox {
	state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		state = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandbox{
		Id:       id,
		State:    state,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + uid, Namespace: "ns", Uid: uid},
		Labels:   map[string]string{runtime.LabelPodUID: uid},
	}
}

// listedContainer is a container of pod uid as ListContainers returns it.
func listedContainer(id, uid string, state runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:    id,
		State: state,
		Labels: map[string]string{
			runtime.LabelPodUID:       uid,
			runtime.LabelPodName:      "pod-" + uid,
			runtime.LabelPodNamespace: "ns",
		},
	}
}

// podRef is what the shell learns of a pod the tracker has it inspect.
type podRef struct {
	UID             types.UID
	Name, Namespace string
	Gone            bool // deleted from the cache rather than inspected
}

// noRoom is a trackerStep.room: the channel takes no event.
const noRoom = -1

// trackerStep is one relist, as the shell sees it: a listing and the
// outcome of the I/O, then what the tracker should have decided.
type trackerStep struct {
	sandboxes   []*runtimeapi.PodSandbox
	containers  []*runtimeapi.Container
	failInspect []types.UID // pods whose GetPodStatus fails
	room        int         // events the channel takes: all if 0, none if noRoom
	giveUp      bool        // the relist gives up before its first pod (ctx ended)

	wantInspect []podRef // in any order
	wantEvents  []Event  // those the channel took; in order within a pod
	wantDropped int      // events the channel refused
	wantTracked []string // IDs of the records kept after the relist
}

// runTracker drives a tracker through steps as Generic.Relist does, with
// the I/O faked, and checks each step: once with the listings decoded
// (diff), once in wire form (splitList and foldWire, as relistWire).
func runTracker(t *testing.T, steps []trackerStep) {
	t.Helper()
	t.Run("decoded", func(t *testing.T) { runTrackerMode(t, steps, false) })
	t.Run("wire", func(t *testing.T) { runTrackerMode(t, steps, true) })
}

// diffWire is tracker.diff on the listings in wire form.
func diffWire(t *testing.T, tr *tracker, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, send sendFunc) ([]*podRecord, int) {
	t.Helper()
	sb, err := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sandboxes})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: containers})
	if err != nil {
		t.Fatal(err)
	}
	sbItems, err := splitList(sb, fieldSandboxState, nil)
	if err != nil {
		t.Fatal(err)
	}
	csItems, err := splitList(cs, fieldContainerState, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.begin()
	if err := tr.foldWire(sb, sbItems, cs, csItems); err != nil {
		t.Fatal(err)
	}
	return tr.end(send)
}

func runTrackerMode(t *testing.T, steps []trackerStep, wire bool) {
	t.Helper()
	tr := newTracker()
	byPod := cmpopts.SortSlices(func(a, b Event) bool { return a.ID < b.ID }) // stable
	for i, st := range steps {
		var events []Event
		send := func(ev *Event) bool {
			if st.room == noRoom || st.room > 0 && len(events) == st.room {
				return false
			}
			events = append(events, *ev)
			return true
		}

		var pods []*podRecord
		var dropped int
		if wire {
			pods, dropped = diffWire(t, &tr, st.sandboxes, st.containers, send)
		} else {
			pods, dropped = tr.diff(st.sandboxes, st.containers, send)
		}
		var inspect []podRef
		for _, pod := range pods {
			inspect = append(inspect, podRef{UID: pod.uid, Name: pod.name, Namespace: pod.namespace, Gone: tr.gone(pod)})
		}
		var rest []*podRecord
		for j, pod := range pods {
			switch {
			case st.giveUp:
				rest = pods[j:]
			case !tr.gone(pod) && slices.Contains(st.failInspect, pod.uid):
				tr.inspectFailed(pod)
				continue
			default:
				dropped += tr.commit(pod, send)
				continue
			}
			break
		}
		tr.finish(rest)

		step := fmt.Sprintf("relist %d", i+1)
		if diff := cmp.Diff(st.wantInspect, inspect, cmpopts.EquateEmpty(),
			cmpopts.SortSlices(func(a, b podRef) bool { return a.UID < b.UID })); diff != "" {
			t.Errorf("%s: pods to inspect (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff(st.wantEvents, events, cmpopts.EquateEmpty(), byPod); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", step, diff)
		}
		if dropped != st.wantDropped {
			t.Errorf("%s: %d events dropped, want %d", step, dropped, st.wantDropped)
		}
		if diff := cmp.Diff(st.wantTracked, slices.Sorted(maps.Keys(tr.ctrs)), cmpopts.EquateEmpty(),
			cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s: records kept (-want +got):\n%s", step, diff)
		}
		checkTracker(t, step, &tr)
	}
}

// checkTracker checks what must hold between two relists: nothing queued,
// nothing owed outside the retry map, every record in its pod.
func checkTracker(t *testing.T, step string, tr *tracker) {
	t.Helper()
	if len(tr.dirty) != 0 {
		t.Errorf("%s: %d pods still queued", step, len(tr.dirty))
	}
	for uid, pod := range tr.pods {
		if pod.dirty || pod.owed != 0 {
			t.Errorf("%s: pod %s left dirty=%v owed=%b", step, uid, pod.dirty, pod.owed)
		}
	}
	for id, rec := range tr.ctrs {
		if tr.pods[rec.pod.uid] != rec.pod || !slices.Contains(rec.pod.ctrs, rec) {
			t.Errorf("%s: record %s is not in its pod %s", step, id, rec.pod.uid)
		}
	}
}

func TestTracker(t *testing.T) {
	ev := func(uid types.UID, typ EventType, id string) Event { return Event{ID: uid, Type: typ, Data: id} }
	podSync := func(uid types.UID) Event { return Event{ID: uid, Type: PodSync} }
	ref := func(uid types.UID) podRef { return podRef{UID: uid, Name: "pod-" + string(uid), Namespace: "ns"} }
	gone := func(uid types.UID) podRef { r := ref(uid); r.Gone = true; return r }
	sbx := func(id, uid string, ready bool) []*runtimeapi.PodSandbox {
		return []*runtimeapi.PodSandbox{listedSandbox(id, uid, ready)}
	}
	ctr := func(id, uid string, state runtimeapi.ContainerState) []*runtimeapi.Container {
		return []*runtimeapi.Container{listedContainer(id, uid, state)}
	}
	// The first relist of pod a: a ready sandbox, a running container,
	// reported and committed.
	aRunning := trackerStep{
		sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
		wantInspect: []podRef{ref("a")},
		wantEvents:  []Event{ev("a", ContainerStarted, "sa"), ev("a", ContainerStarted, "a1")},
		wantTracked: []string{"sa", "a1"},
	}
	// Pod a listed again as in aRunning, to no effect.
	aUnchanged := trackerStep{
		sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
		wantTracked: []string{"sa", "a1"},
	}

	tests := []struct {
		name  string
		steps []trackerStep
	}{
		{"a new running container is started", []trackerStep{aRunning}},
		{"a new exited container died", []trackerStep{{
			sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
			wantInspect: []podRef{ref("a")},
			wantEvents:  []Event{ev("a", ContainerStarted, "sa"), ev("a", ContainerDied, "a1")},
			wantTracked: []string{"sa", "a1"},
		}}},
		{"a listing without changes inspects nothing", []trackerStep{aRunning, aUnchanged, aUnchanged}},
		{"only the pod that changed is inspected", []trackerStep{
			{
				sandboxes:   []*runtimeapi.PodSandbox{listedSandbox("sa", "a", true), listedSandbox("sb", "b", true)},
				wantInspect: []podRef{ref("a"), ref("b")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa"), ev("b", ContainerStarted, "sb")},
				wantTracked: []string{"sa", "sb"},
			},
			{
				sandboxes:   []*runtimeapi.PodSandbox{listedSandbox("sa", "a", true), listedSandbox("sb", "b", false)},
				wantInspect: []podRef{ref("b")},
				wantEvents:  []Event{ev("b", ContainerDied, "sb")},
				wantTracked: []string{"sa", "sb"},
			},
		}},
		{"a created container is inspected but ContainerChanged is not sent", []trackerStep{
			{
				sandboxes:   sbx("sa", "a", true),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa")},
				wantTracked: []string{"sa"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrCreated),
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "a1")},
				wantTracked: []string{"sa", "a1"},
			},
		}},
		{"a running container that exits died", []trackerStep{aRunning, {
			sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
			wantInspect: []podRef{ref("a")},
			wantEvents:  []Event{ev("a", ContainerDied, "a1")},
			wantTracked: []string{"sa", "a1"},
		}}},
		{"an exited container that is removed is removed", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa"), ev("a", ContainerDied, "a1")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes:   sbx("sa", "a", true),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerRemoved, "a1")},
				wantTracked: []string{"sa"},
			},
		}},
		{"a running container that is removed died and is removed", []trackerStep{aRunning, {
			sandboxes:   sbx("sa", "a", true),
			wantInspect: []podRef{ref("a")},
			wantEvents:  []Event{ev("a", ContainerDied, "a1"), ev("a", ContainerRemoved, "a1")},
			wantTracked: []string{"sa"},
		}}},
		{"a sandbox that stops died, its replacement is started", []trackerStep{
			aRunning,
			{
				sandboxes: sbx("sa", "a", false), containers: ctr("a1", "a", ctrExited),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerDied, "sa"), ev("a", ContainerDied, "a1")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa2", "a", true), containers: ctr("a1", "a", ctrExited),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerRemoved, "sa"), ev("a", ContainerStarted, "sa2")},
				wantTracked: []string{"sa2", "a1"},
			},
		}},
		{"a pod no longer listed is gone, and forgotten", []trackerStep{
			aRunning,
			{
				wantInspect: []podRef{gone("a")},
				wantEvents: []Event{
					ev("a", ContainerDied, "sa"), ev("a", ContainerRemoved, "sa"),
					ev("a", ContainerDied, "a1"), ev("a", ContainerRemoved, "a1"),
				},
			},
			{},
		}},
		{"a pod whose inspection failed is inspected again, then reported", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa"), ev("a", ContainerStarted, "a1")},
				wantTracked: []string{"sa", "a1"},
			},
			aUnchanged,
		}},
		{"a pod whose inspection failed is inspected again though its containers went back", []trackerStep{
			aRunning,
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			aUnchanged,
		}},
		{"after a failed inspection, events compare with what was last reported", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa"), ev("a", ContainerDied, "a1")},
				wantTracked: []string{"sa", "a1"},
			},
		}},
		{"a container that vanished before it was reported is forgotten", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes:   sbx("sa", "a", true),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa")},
				wantTracked: []string{"sa"},
			},
		}},
		{"a container that came and went unreported does not get its pod inspected", []trackerStep{
			{
				sandboxes:   sbx("sa", "a", true),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa")},
				wantTracked: []string{"sa"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), giveUp: true,
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes:   sbx("sa", "a", true),
				wantTracked: []string{"sa"},
			},
		}},
		{"a pod that came and went unreported is gone without events", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), giveUp: true,
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{wantInspect: []podRef{gone("a")}},
			{},
		}},
		{"a pod that vanished before it was reported is gone without events", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{wantInspect: []podRef{gone("a")}},
			{},
		}},
		{"events the channel refused earn a PodSync on the next relist", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), room: 1,
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa")},
				wantDropped: 1,
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{podSync("a")},
				wantTracked: []string{"sa", "a1"},
			},
			aUnchanged,
		}},
		{"no PodSync when another event of the pod gets through", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), room: 1,
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa")},
				wantDropped: 1,
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerDied, "a1")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				wantTracked: []string{"sa", "a1"},
			},
		}},
		{"a PodSync is tried when all the pod's events are refused, and owed until taken", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), room: 1,
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{ev("a", ContainerStarted, "sa")},
				wantDropped: 1,
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited), room: noRoom,
				wantInspect: []podRef{ref("a")},
				wantDropped: 2, // ContainerDied, then the PodSync
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited), room: noRoom,
				wantInspect: []podRef{ref("a")},
				wantDropped: 1,
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{podSync("a")},
				wantTracked: []string{"sa", "a1"},
			},
		}},
		{"a pod that is gone still gets the PodSync it is owed", []trackerStep{
			aRunning,
			{
				room:        1,
				wantInspect: []podRef{gone("a")},
				wantEvents:  []Event{ev("a", ContainerDied, "sa")},
				wantDropped: 3,
			},
			{room: noRoom, wantDropped: 1},
			{wantEvents: []Event{podSync("a")}},
			{},
		}},
		{"a relist that gives up leaves the records uncommitted", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), giveUp: true,
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			aRunning,
		}},
		{"a relist that gives up keeps what it owes", []trackerStep{
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), room: noRoom,
				wantInspect: []podRef{ref("a")},
				wantDropped: 2,
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), giveUp: true,
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				wantInspect: []podRef{ref("a")},
				wantEvents:  []Event{podSync("a")},
				wantTracked: []string{"sa", "a1"},
			},
		}},
		{"a relist that gives up keeps a failed inspection owed", []trackerStep{
			aRunning,
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrExited),
				failInspect: []types.UID{"a"},
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning), giveUp: true,
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			{
				sandboxes: sbx("sa", "a", true), containers: ctr("a1", "a", ctrRunning),
				wantInspect: []podRef{ref("a")},
				wantTracked: []string{"sa", "a1"},
			},
			aUnchanged,
		}},
		{"objects without a pod UID are ignored; a sandbox's metadata UID counts", []trackerStep{{
			sandboxes: []*runtimeapi.PodSandbox{
				{Id: "x", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{Name: "x"}},
				{Id: "sm", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-m", Namespace: "ns", Uid: "m"}},
			},
			containers: []*runtimeapi.Container{
				{Id: "y", State: ctrRunning, Labels: map[string]string{runtime.LabelPodName: "y"}},
			},
			wantInspect: []podRef{ref("m")},
			wantEvents:  []Event{ev("m", ContainerStarted, "sm")},
			wantTracked: []string{"sm"},
		}}},
		{"a pod's name comes from the first record that has one", []trackerStep{{
			sandboxes: []*runtimeapi.PodSandbox{
				{Id: "sn", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{runtime.LabelPodUID: "n"}},
			},
			containers: []*runtimeapi.Container{
				listedContainer("n1", "n", ctrRunning),
				{Id: "n2", State: ctrRunning, Labels: map[string]string{
					runtime.LabelPodUID: "n", runtime.LabelPodName: "other", runtime.LabelPodNamespace: "other",
				}},
			},
			wantInspect: []podRef{ref("n")},
			wantEvents: []Event{
				ev("n", ContainerStarted, "sn"), ev("n", ContainerStarted, "n1"), ev("n", ContainerStarted, "n2"),
			},
			wantTracked: []string{"sn", "n1", "n2"},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runTracker(t, tt.steps)
		})
	}
}

// TestTrackerGivesBackRoom relists a churn of many pods in the runtime at
// once, then none: once the relists committed every pod's removal, the
// tracker gives back the room its maps and scratch space grew to, rather
// than hold it for as long as the PLEG runs.
func TestTrackerGivesBackRoom(t *testing.T) {
	tr := newTracker()
	send := func(*Event) bool { return true }
	relist := func(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
		inspect, _ := tr.diff(sandboxes, containers, send)
		for _, pod := range inspect {
			tr.commit(pod, send)
		}
		tr.finish(nil)
	}
	churn := func(pods int) {
		sandboxes := make([]*runtimeapi.PodSandbox, pods)
		containers := make([]*runtimeapi.Container, pods)
		for i := range pods {
			uid := fmt.Sprintf("uid-%d", i)
			sandboxes[i] = listedSandbox("s-"+uid, uid, true)
			containers[i] = listedContainer("c-"+uid, uid, ctrRunning)
		}
		relist(sandboxes, containers)
		relist(nil, nil)
	}
	churn(10) // what the first relists make once
	before := leakcheck.LiveHeap()
	const pods = 10000
	churn(pods)
	if len(tr.pods)+len(tr.ctrs)+len(tr.retry) != 0 {
		t.Fatalf("after the churn the tracker knows %d pods, %d records, %d retries; want none", len(tr.pods), len(tr.ctrs), len(tr.retry))
	}
	// Some 40 bytes a pod in the maps of pods and records, 8 in the
	// scratch space: over 1 MiB kept.
	if after := leakcheck.LiveHeap(); after > before+128<<10 {
		t.Errorf("live heap %d KiB after %d pods came and went, %d KiB before: the room they took is kept",
			after>>10, pods, before>>10)
	}
	sysruntime.KeepAlive(&tr) // live while the heap is measured
}
