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
	if diff := cmp.Diff(want, compactSandboxStatus(full), protocmp.Transform()); diff != "" {
		t.Errorf("compactSandboxStatus (-want +got):\n%s", diff)
	}
	// A status without Linux options keeps none.
	if got := compactSandboxStatus(&runtimeapi.PodSandboxStatus{Id: "sb2"}); got.Linux != nil || got.Id != "sb2" {
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
	if n := testing.AllocsPerRun(100, func() { compactSandboxStatus(full) }); n != 2 {
		t.Errorf("compactSandboxStatus allocates %v times, want 2", n)
	}
	got := compactSandboxStatus(&runtimeapi.PodSandboxStatus{Id: "sb"})
	if got.Metadata != nil || got.Network != nil || got.Linux != nil {
		t.Errorf("compactSandboxStatus of a status without metadata, network or Linux part = %v, want none of them", got)
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
