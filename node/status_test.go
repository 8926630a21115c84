package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

var testMachine = Machine{
	CPUs: 4, MemoryBytes: 8 << 30, EphemeralStorageBytes: 100 << 30,
	MachineID: "mid", SystemUUID: "uuid", BootID: "boot", KernelVersion: "6.1.0",
	OSImage: "Debian GNU/Linux 12 (bookworm)", OperatingSystem: "linux", Architecture: "amd64",
}

func testFacts(t *testing.T, opts Options) facts {
	t.Helper()
	if opts.nodeName == "" {
		opts.nodeName = "n1"
	}
	opts.AgentVersion = "nodekit/v0.1.0"
	if err := opts.setDefaults(); err != nil {
		t.Fatal(err)
	}
	return newFacts(opts, testMachine, net.ParseIP("192.0.2.10").To4())
}

func TestNewFacts(t *testing.T) {
	f := testFacts(t, Options{
		Labels:   map[string]string{"role": "edge", LabelOS: "plan9"},
		Capacity: v1.ResourceList{"example.com/gpu": resource.MustParse("2")},
		Reserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("16Gi")},
	})
	want := facts{
		labels: map[string]string{"role": "edge", LabelOS: "linux", LabelArch: "amd64", LabelHostname: "n1"},
		capacity: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
			v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			"example.com/gpu": resource.MustParse("2"),
		},
		allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("3500m"), v1.ResourceMemory: resource.MustParse("0"),
			v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			"example.com/gpu": resource.MustParse("2"),
		},
		addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "n1"}},
		nodeInfo: v1.NodeSystemInfo{
			MachineID: "mid", SystemUUID: "uuid", BootID: "boot", KernelVersion: "6.1.0",
			OSImage: "Debian GNU/Linux 12 (bookworm)", KubeletVersion: "nodekit/v0.1.0",
			OperatingSystem: "linux", Architecture: "amd64",
		},
	}
	if diff := cmp.Diff(want, f, cmp.AllowUnexported(facts{}), quantityCmp); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}

var quantityCmp = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestStatus(t *testing.T) {
	f := testFacts(t, Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(10 * time.Second)
	ready := f.status(v1.NodeStatus{}, "containerd://2.4.2", nil, t0)
	foreign := v1.NodeCondition{Type: "NetworkUnavailable", Status: v1.ConditionFalse, Reason: "RouteCreated"}

	tests := []struct {
		name   string
		old    v1.NodeStatus
		health error
		// want: the Ready condition, the transition time, and whether the
		// status changed.
		wantReady      v1.ConditionStatus
		wantMessage    string
		wantTransition time.Time
		wantChanged    bool
		check          func(t *testing.T, s v1.NodeStatus)
	}{
		{
			name: "first status", old: v1.NodeStatus{},
			wantReady: v1.ConditionTrue, wantMessage: messageReady, wantTransition: t1, wantChanged: true,
		},
		{
			name: "unchanged but for the heartbeat", old: ready,
			wantReady: v1.ConditionTrue, wantMessage: messageReady, wantTransition: t0, wantChanged: false,
		},
		{
			name: "becomes not ready", old: ready, health: errors.New("pleg: not healthy"),
			wantReady: v1.ConditionFalse, wantMessage: "pleg: not healthy", wantTransition: t1, wantChanged: true,
		},
		{
			name: "keeps conditions and resources it does not own",
			old: func() v1.NodeStatus {
				s := *ready.DeepCopy()
				s.Conditions = append([]v1.NodeCondition{foreign}, s.Conditions...)
				s.Capacity["example.com/fpga"] = resource.MustParse("1")
				return s
			}(),
			wantReady: v1.ConditionTrue, wantMessage: messageReady, wantTransition: t0, wantChanged: false,
			check: func(t *testing.T, s v1.NodeStatus) {
				if diff := cmp.Diff(foreign, s.Conditions[0]); diff != "" {
					t.Errorf("foreign condition (-want +got):\n%s", diff)
				}
				if q := s.Capacity["example.com/fpga"]; q.String() != "1" {
					t.Errorf("foreign capacity %v, want 1", q.String())
				}
			},
		},
		{
			name: "a changed address",
			old: func() v1.NodeStatus {
				s := *ready.DeepCopy()
				s.Addresses[0].Address = "192.0.2.99"
				return s
			}(),
			wantReady: v1.ConditionTrue, wantMessage: messageReady, wantTransition: t0, wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.status(tt.old, "containerd://2.4.2", tt.health, t1)
			i := conditionIndex(got.Conditions, v1.NodeReady)
			if i < 0 {
				t.Fatalf("no Ready condition in %v", got.Conditions)
			}
			c := got.Conditions[i]
			if c.Status != tt.wantReady || c.Message != tt.wantMessage {
				t.Errorf("Ready = %s %q, want %s %q", c.Status, c.Message, tt.wantReady, tt.wantMessage)
			}
			if !c.LastTransitionTime.Time.Equal(tt.wantTransition) {
				t.Errorf("Ready transition time %v, want %v", c.LastTransitionTime, tt.wantTransition)
			}
			for _, c := range got.Conditions {
				if c.Type != "NetworkUnavailable" && !c.LastHeartbeatTime.Time.Equal(t1) {
					t.Errorf("%s heartbeat %v, want %v", c.Type, c.LastHeartbeatTime, t1)
				}
			}
			if ch := statusChanged(tt.old, got); ch != tt.wantChanged {
				t.Errorf("statusChanged = %v, want %v", ch, tt.wantChanged)
			}
			if got.NodeInfo.ContainerRuntimeVersion != "containerd://2.4.2" {
				t.Errorf("runtime version %q", got.NodeInfo.ContainerRuntimeVersion)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestStatusPatch(t *testing.T) {
	f := testFacts(t, Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := f.newNode("n1", nil, "", nil, t0)
	old.UID = "uid-1"
	old.Status.Conditions = append(old.Status.Conditions, v1.NodeCondition{Type: "NetworkUnavailable", Status: v1.ConditionFalse})
	status := f.status(old.Status, "", errors.New("runtime down"), t0.Add(time.Minute))

	patch, err := statusPatch(old, status)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Metadata map[string]any `json:"metadata"`
		Spec     any            `json:"spec"`
	}
	if err := json.Unmarshal(patch, &m); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"uid": "uid-1"}, m.Metadata); diff != "" {
		t.Errorf("patch metadata (-want +got):\n%s", diff)
	}
	if m.Spec != nil {
		t.Errorf("patch touches the spec: %s", patch)
	}
	oldData, _ := json.Marshal(old)
	patched, err := strategicpatch.StrategicMergePatch(oldData, patch, v1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	var got v1.Node
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(status, got.Status, quantityCmp); diff != "" {
		t.Errorf("patched status (-want +got):\n%s", diff)
	}
}

func TestLabelsPatch(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{UID: "u", Labels: map[string]string{"a": "1", "b": "old", "c": "3"}}}
	tests := []struct {
		name string
		want map[string]string
		out  string
	}{
		{"all there", map[string]string{"a": "1"}, ""},
		{"missing and changed", map[string]string{"a": "1", "b": "new", "d": "4"}, `{"metadata":{"labels":{"b":"new","d":"4"},"uid":"u"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := labelsPatch(n, tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.out, string(p)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusKubeletEndpoint: the node API's port is advertised in
// status.daemonEndpoints, and a Node advertising another is updated.
func TestStatusKubeletEndpoint(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	none := testFacts(t, Options{}).status(v1.NodeStatus{}, "", nil, now)
	if got := none.DaemonEndpoints.KubeletEndpoint.Port; got != 0 {
		t.Errorf("without a port: %d, want 0", got)
	}
	f := testFacts(t, Options{KubeletPort: 10250})
	s := f.status(none, "", nil, now)
	if got := s.DaemonEndpoints.KubeletEndpoint.Port; got != 10250 {
		t.Errorf("port %d, want 10250", got)
	}
	if !statusChanged(none, s) {
		t.Error("a new port is no change")
	}
	if statusChanged(s, f.status(s, "", nil, now)) {
		t.Error("the same port is a change")
	}
}

// TestStatusDeclaredFeatures: the declared features are reported sorted and
// without duplicates, replace those of an older agent, and a Node that
// already declares them is no change.
func TestStatusDeclaredFeatures(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := v1.NodeStatus{DeclaredFeatures: []string{"Gone"}}
	f := testFacts(t, Options{DeclaredFeatures: []string{"B", "A", "B"}})
	s := f.status(old, "", nil, now)
	if got := strings.Join(s.DeclaredFeatures, ","); got != "A,B" {
		t.Errorf("declared %q, want A,B", got)
	}
	if !statusChanged(old, s) {
		t.Error("new declared features are no change")
	}
	if statusChanged(s, f.status(s, "", nil, now)) {
		t.Error("the same declared features are a change")
	}
	if got := testFacts(t, Options{}).status(s, "", nil, now).DeclaredFeatures; got != nil {
		t.Errorf("without features: %v, want none", got)
	}
}

// statusChanged leaves the statuses it compares as they were: their
// conditions keep their heartbeats.
func TestStatusChangedLeavesItsArguments(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	later := metav1.NewTime(at.Add(10 * time.Second))
	a := v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: at}}}
	b := v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: later}}}
	if statusChanged(a, b) {
		t.Error("statuses that differ in their heartbeats alone changed")
	}
	if a.Conditions[0].LastHeartbeatTime != at || b.Conditions[0].LastHeartbeatTime != later {
		t.Errorf("heartbeats after the comparison: %v, %v; want %v, %v", a.Conditions[0].LastHeartbeatTime, b.Conditions[0].LastHeartbeatTime, at, later)
	}
}

// BenchmarkStatusChanged is the comparison of every status pass: an
// unchanged status of a node with 50 images.
func BenchmarkStatusChanged(b *testing.B) {
	s := v1.NodeStatus{
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}, {Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse}},
		Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.1"}, {Type: v1.NodeHostName, Address: "n1"}},
		Capacity:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
	}
	s.Allocatable = s.Capacity.DeepCopy()
	for i := range 50 {
		s.Images = append(s.Images, v1.ContainerImage{Names: []string{fmt.Sprintf("registry.example/image-%d@sha256:%064d", i, i), fmt.Sprintf("registry.example/image-%d:v1", i)}, SizeBytes: int64(i) << 20})
	}
	next := *s.DeepCopy()
	b.ReportAllocs()
	for b.Loop() {
		if statusChanged(s, next) {
			b.Fatal("changed")
		}
	}
}
