package runtime

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCompactSandboxStatus(t *testing.T) {
	full := &runtimeapi.PodSandboxStatus{
		Id:        "sb1",
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: 2},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: 42,
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2", AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::2"}}},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER},
		}},
		Labels:         map[string]string{LabelPodUID: "uid-1", "app": "web"},
		Annotations:    map[string]string{"a": "b"},
		RuntimeHandler: "runc",
	}
	want := &runtimeapi.PodSandboxStatus{
		Id:             full.Id,
		Metadata:       full.Metadata,
		State:          full.State,
		CreatedAt:      full.CreatedAt,
		Network:        full.Network,
		Linux:          full.Linux,
		RuntimeHandler: full.RuntimeHandler,
	}
	if diff := cmp.Diff(want, compactSandboxStatus(full, &PodStatus{}), protocmp.Transform()); diff != "" {
		t.Errorf("compactSandboxStatus (-want +got):\n%s", diff)
	}
	// A status without Linux options keeps none.
	if got := compactSandboxStatus(&runtimeapi.PodSandboxStatus{Id: "sb2"}, &PodStatus{}); got.Linux != nil || got.Id != "sb2" {
		t.Errorf("compactSandboxStatus of a bare status = %v", got)
	}
}

func TestCompactSandboxStatusAllocations(t *testing.T) {
	full := &runtimeapi.PodSandboxStatus{
		Id:             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Metadata:       &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		State:          runtimeapi.PodSandboxState_SANDBOX_READY,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2"},
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{}}},
		RuntimeHandler: "runc",
	}
	// Its messages in one allocation, its strings in another.
	if n := testing.AllocsPerRun(100, func() { compactSandboxStatus(full, &PodStatus{}) }); n != 2 {
		t.Errorf("compactSandboxStatus allocates %v times, want 2", n)
	}
	got := compactSandboxStatus(&runtimeapi.PodSandboxStatus{Id: "sb"}, &PodStatus{})
	if got.Metadata != nil || got.Network != nil || got.Linux != nil {
		t.Errorf("compactSandboxStatus of a status without metadata, network or Linux part = %v, want none of them", got)
	}
}

// TestCompactStatusSharesStrings: a sandbox's metadata shares the pod's
// name, namespace and UID with its PodStatus, a container's sandbox ID is
// its sandbox's, and the image strings are shared between pods.
func TestCompactStatusSharesStrings(t *testing.T) {
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	ps := &PodStatus{ID: "uid-1", Name: "web", Namespace: "default"}
	sb := compactSandboxStatus(&runtimeapi.PodSandboxStatus{
		Id:       "sb1",
		Metadata: &runtimeapi.PodSandboxMetadata{Name: strings.Clone("web"), Namespace: strings.Clone("default"), Uid: strings.Clone("uid-1")},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "c0"},
		}},
	}, ps)
	md := sb.GetMetadata()
	if !same(md.GetName(), ps.Name) || !same(md.GetNamespace(), ps.Namespace) || !same(md.GetUid(), string(ps.ID)) {
		t.Errorf("sandbox metadata %v does not share the pod's strings", md)
	}
	if o := sb.GetLinux().GetNamespaces().GetOptions(); o.GetPid() != runtimeapi.NamespaceMode_TARGET || o.GetTargetId() != "c0" {
		t.Errorf("namespace options %v, want pid TARGET c0", o)
	}
	// Metadata that differs from the pod's is copied as it is.
	other := compactSandboxStatus(&runtimeapi.PodSandboxStatus{Id: "sb0", Metadata: &runtimeapi.PodSandboxMetadata{Name: "old", Uid: "uid-1"}}, ps)
	if md := other.GetMetadata(); md.GetName() != "old" || md.GetNamespace() != "" || md.GetUid() != "uid-1" {
		t.Errorf("sandbox metadata %v, want name old, no namespace, uid-1", md)
	}
	ps.SandboxStatuses = []*runtimeapi.PodSandboxStatus{other, sb}
	convert := func(id, sandbox string) *ContainerStatus {
		return convertContainerStatus(&runtimeapi.Container{Id: id, PodSandboxId: strings.Clone(sandbox)}, &runtimeapi.ContainerStatus{
			Id:       id,
			Metadata: &runtimeapi.ContainerMetadata{Name: strings.Clone("app")},
			Image:    &runtimeapi.ImageSpec{Image: strings.Clone("busybox:1.36")},
			ImageRef: strings.Clone("sha256:0123"),
			Labels:   map[string]string{LabelContainerHash: strings.Clone("h1")},
		}, ps, "")
	}
	a, b := convert("c1", "sb1"), convert("c2", "sb1")
	if !same(a.SandboxID, sb.GetId()) {
		t.Errorf("container's sandbox ID %q does not share its sandbox's", a.SandboxID)
	}
	if !same(a.Name, b.Name) || !same(a.Image, b.Image) || !same(a.ImageRef, b.ImageRef) || a.Name != "app" || a.Image != "busybox:1.36" || a.ImageRef != "sha256:0123" {
		t.Errorf("containers %+v and %+v do not share their name and image strings", a, b)
	}
	if !same(a.Hash, b.Hash) {
		t.Errorf("containers' spec hashes %q and %q are not shared", a.Hash, b.Hash)
	}
	if a.ID != "c1" || b.ID != "c2" || a.Hash != "h1" {
		t.Errorf("container IDs %q, %q and hash %q, want c1, c2, h1", a.ID, b.ID, a.Hash)
	}
	// A container of a sandbox the status does not hold keeps its own ID.
	if c := convert("c3", "gone"); c.SandboxID != "gone" || c.ID != "c3" {
		t.Errorf("container of an unknown sandbox: ID %q sandbox %q, want c3, gone", c.ID, c.SandboxID)
	}
}

func TestPackStrings(t *testing.T) {
	a, b, empty, c := "alpha", "", "", "gamma"
	packStrings(&a, &b, &empty, &c)
	if a != "alpha" || b != "" || empty != "" || c != "gamma" {
		t.Errorf("packStrings changed the values: %q %q %q %q", a, b, empty, c)
	}
	x, y := strings.Clone("one"), strings.Clone("two")
	if n := testing.AllocsPerRun(100, func() { packStrings(&x, &y) }); n != 1 {
		t.Errorf("packStrings of two strings allocates %v times, want 1", n)
	}
	// y sits right after x in the one allocation.
	if unsafe.StringData(y) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(x)), len(x))) {
		t.Error("packStrings did not put the strings in one allocation")
	}
	var none1, none2 string
	if n := testing.AllocsPerRun(100, func() { packStrings(&none1, &none2) }); n != 0 {
		t.Errorf("packStrings of empty strings allocates %v times, want 0", n)
	}
}
