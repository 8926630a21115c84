package runtime

import (
	"testing"

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
